#!/usr/bin/env bash
# The concurrency-heavy suites under ThreadSanitizer, the parsers under AddressSanitizer
# (issue 33). Each sanitizer is a build of its own (about 10 minutes on 2 cores, in
# .build-tsan / .build-asan); the reports go to .sanitizers/<name>.log and a summary is
# printed: the suites run, their tests, and the sanitizer reports found (0 expected).
#
#   scripts/sanitizers.sh            both
#   scripts/sanitizers.sh thread     ThreadSanitizer only
#   scripts/sanitizers.sh address    AddressSanitizer only
#
# PostgreSQL and the HTTP/2 servers are used as the test suite uses them (installed as .ci/run
# installs them); the suites that need them are skipped without.
set -uo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}
mkdir -p .sanitizers

# Ingest, the dispatcher, HTTP/2, the socket, the cluster: tasks, locks and event loops.
THREAD_SUITES='IngestQueueTests|IngestorTests|IngestionTests|UnixSocketSourceTests|SocketLimitsTests|DeadLetterFileTests|DispatcherTests|HTTP2SendingTests|HTTP2TransportTests|PinnedHTTP1Tests|InboxIntakeTests|LeaseKeeperTests|PostgresClusterTests|AccessTokenCacheTests|WebLayerTests'
# What reads outside input: JSON, records, rules, JOSE and tokens, requests, provider answers,
# configuration.
ADDRESS_SUITES='PushJSONTests|ChangeRecordTests|ReadRulesTests|PushJOSETests|BearerTokenTests|SubscriptionRequestTests|DeviceContextTests|ClassifierTests|RetryAfterTests|ConfigurationTests|WebPushEndpointPolicyTests|RequestTargetTests|BadInputTests|PushFuzzTests'

run() {
    local name=$1 flag=$2 suites=$3 scratch=.build-$1
    local log=.sanitizers/$name.log
    echo "== $name: building with --sanitize=$flag into $scratch"
    local started=$(date +%s)
    if ! swift build --build-tests --sanitize="$flag" --scratch-path "$scratch" >"$log.build" 2>&1; then
        echo "$name: the build failed; see $log.build"
        tail -20 "$log.build"
        return 1
    fi
    local built=$(date +%s)
    echo "== $name: built in $((built - started)) s; running: $suites"
    TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
    ASAN_OPTIONS="detect_leaks=0 halt_on_error=0 ${ASAN_OPTIONS:-}" \
        swift test --skip-build --sanitize="$flag" --scratch-path "$scratch" --filter "$suites" >"$log" 2>&1
    local status=$?
    local reports=$(grep -c "WARNING: ThreadSanitizer\|ERROR: AddressSanitizer" "$log")
    local tests=$(grep -E "Test run with [0-9]+ tests" "$log" | tail -1)
    echo "== $name: tests exit $status in $(($(date +%s) - built)) s; $tests; sanitizer reports: $reports (log: $log)"
    [ "$reports" -eq 0 ] && [ "$status" -eq 0 ]
}

result=0
if [ "$which" = all ] || [ "$which" = thread ]; then run tsan thread "$THREAD_SUITES" || result=1; fi
if [ "$which" = all ] || [ "$which" = address ]; then run asan address "$ADDRESS_SUITES" || result=1; fi
exit $result
