-- wrk script: every request creates a distinct subscription (a new context), so each is a
-- 201 and a durable commit. Usage: see scripts/bench-api.sh.
local counter = 0
local token = os.getenv("BENCH_TOKEN")
local threads = 0

-- Runs in the main state: gives each thread its own id (a global of that thread's state).
setup = function(thread)
  thread:set("thread_id", threads)
  threads = threads + 1
end

request = function()
  counter = counter + 1
  local body = string.format(
    '{"kind":"mobile","mode":"value","path":"/users/u1/inbox/%d","context":"device-%d-%d"}',
    counter % 1000, thread_id, counter)
  return wrk.format("POST", "/datasync/v2/toto/subscriptions/u1", {
    ["Authorization"] = "Bearer " .. token,
    ["Content-Type"] = "application/json",
  }, body)
end

local statuses = {}
response = function(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

done = function(summary, latency, requests)
  io.write(string.format("requests: %d, errors: %d (status %d, timeout %d)\n", summary.requests,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, summary.errors.timeout))
  io.write(string.format("latency p50 %.2f ms, p99 %.2f ms\n", latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
