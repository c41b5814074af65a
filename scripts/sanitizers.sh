#!/usr/bin/env bash
# The concurrency-heavy suites under ThreadSanitizer, the parsers under AddressSanitizer
# (issue 33). Each sanitizer is a build of its own (about 10 minutes on 2 cores, in
# .build-tsan / .build-asan); the reports go to .sanitizers/<name>.log and a summary is
# printed: the suites run, their tests, and the sanitizer reports found (0 expected).
# ThreadSanitizer cannot see Synchronization.Mutex on Linux (its futex): its reports of two
# accesses both made under a Mutex are counted apart, shown to be false by a demonstration on
# the same toolchain, and only the others count (scripts/tsan_classify.py).
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
    local tests=$(grep -E "Test run with [0-9]+ tests" "$log" | tail -1)
    echo "== $name: tests exit $status in $(($(date +%s) - built)) s; $tests"
    # Tests that wait on deadlines may miss them under a sanitizer (ThreadSanitizer runs code 5
    # to 15 times slower): their failures are listed, the reports decide.
    grep -E "✘ Test .* failed after" "$log" | cut -c1-200
    if [ "$name" = tsan ]; then
        # Synchronization.Mutex is invisible to ThreadSanitizer on Linux: shown first, then the
        # reports that are not explained by it (scripts/tsan_classify.py) decide.
        mutex_demo
        python3 scripts/tsan_classify.py "$log" | tee "$log.others"
        return "${PIPESTATUS[0]}"
    fi
    local reports=$(grep -c "ERROR: AddressSanitizer" "$log")
    echo "== $name: sanitizer reports: $reports (log: $log)"
    [ "$reports" -eq 0 ]
}

# The same counter under a Mutex and under an NSLock, under ThreadSanitizer: reports for the
# first, none for the second, on this toolchain.
mutex_demo() {
    local demo=.sanitizers/tsan_mutex_demo
    if swiftc -sanitize=thread scripts/tsan_mutex_demo.swift -o "$demo" >"$demo.build" 2>&1; then
        local with_mutex=$("$demo" mutex 2>&1 | grep -c "WARNING: ThreadSanitizer")
        local with_nslock=$("$demo" nslock 2>&1 | grep -c "WARNING: ThreadSanitizer")
        echo "== tsan: the same guarded counter: $with_mutex reports under Synchronization.Mutex, $with_nslock under NSLock (scripts/tsan_mutex_demo.swift)"
    else
        echo "== tsan: the Mutex demonstration did not build; see $demo.build"
    fi
}

result=0
if [ "$which" = all ] || [ "$which" = thread ]; then run tsan thread "$THREAD_SUITES" || result=1; fi
if [ "$which" = all ] || [ "$which" = address ]; then run asan address "$ADDRESS_SUITES" || result=1; fi
exit $result
