-- wrk script: every request creates a distinct subscription (a new context), so each is a
-- 201 and a durable commit. Usage: see scripts/bench-api.sh.
-- Users u0, u1, … each with its token (a line of $BENCH_TOKENS), taken in turn.
local counter = 0
local tokens = {}
for line in io.lines(os.getenv("BENCH_TOKENS")) do tokens[#tokens + 1] = line end
local threads = 0

-- Runs in the main state: gives each thread its own id (a global of that thread's state).
setup = function(thread)
  thread:set("thread_id", threads)
  threads = threads + 1
end

request = function()
  counter = counter + 1
  local user = (counter * 2 + thread_id) % #tokens
  local body = string.format(
    '{"kind":"mobile","mode":"value","path":"/users/u%d/inbox/%d","context":"device-%d-%d"}',
    user, counter % 1000, thread_id, counter)
  return wrk.format("POST", "/datasync/v2/toto/subscriptions/u" .. user, {
    ["Authorization"] = "Bearer " .. tokens[user + 1],
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
