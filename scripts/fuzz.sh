#!/usr/bin/env bash
# Coverage-guided fuzzing of the parsers that take outside input (issue 33; docs/testing.md).
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--no-build] [TARGET…]
#
# Builds the libFuzzer package (Fuzz/) with -sanitize=fuzzer,address into .build-fuzz/ (a
# full release build of the package's closure the first time: ~20-30 minutes on 2 cores), then
# runs each target (default: all of them) for N seconds (default 60), J at a time (default 1;
# at most the number of cores). Each target starts from Fuzz/corpus/<target>/ and
# Fuzz/regressions/<target>/ and adds what it finds to .fuzz-work/<target>/ (not committed).
# A crash, a timeout (10 s) or running out of memory stops that target and leaves the input in
# .fuzz-crashes/<target>/; the log is .fuzz-logs/<target>.log. At the end: executions,
# coverage (cov: edges, ft: features), corpus size and crashes of each target.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

all=(json record rules jose bearer subscription webpush provider config)
seconds=60
jobs=1
build=1
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *)
            if [[ ! " ${all[*]} " == *" $1 "* ]]; then echo "unknown target $1; the targets are: ${all[*]}" >&2; exit 2; fi
            targets+=("$1"); shift ;;
    esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")

scratch="$root/.build-fuzz"
if [ "$build" = 1 ]; then
    echo "== building the fuzz targets with -sanitize=fuzzer,address ($(date +%H:%M:%S))"
    swift build -c release --package-path Fuzz --scratch-path "$scratch" \
        -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library
fi
bin="$scratch/release"

# Leak detection is off: the Swift runtime's caches read as leaks at exit.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}"

run() {
    local target=$1
    local work="$root/.fuzz-work/$target" crashes="$root/.fuzz-crashes/$target" log="$root/.fuzz-logs/$target.log"
    mkdir -p "$work" "$crashes" "$root/.fuzz-logs"
    local seeds=("$root/Fuzz/corpus/$target")
    [ -d "$root/Fuzz/regressions/$target" ] && seeds+=("$root/Fuzz/regressions/$target")
    local max_len=4096
    [ "$target" = config ] && max_len=8192
    echo "   $target: ${seconds}s, log $log"
    # setsid: a crashing target's backtracer must not reach this script's process group.
    setsid "$bin/fuzz-$target" "$work" "${seeds[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
        -max_len="$max_len" -detect_leaks=0 -print_final_stats=1 -artifact_prefix="$crashes/" </dev/null >"$log" 2>&1 || true
}

echo "== fuzzing ${targets[*]} for ${seconds}s each, $jobs at a time ($(date +%H:%M:%S))"
running=0
for target in "${targets[@]}"; do
    run "$target" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

echo
echo "== results ($(date +%H:%M:%S))"
printf '%-13s %9s %12s %7s %7s %8s %8s\n' target seconds executions cov ft corpus crashes
status=0
for target in "${targets[@]}"; do
    log="$root/.fuzz-logs/$target.log"
    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    # The last status line: "#N  DONE|pulse|NEW … cov: X ft: Y corp: A/B …".
    last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 || true)
    cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.*ft: \([0-9]*\).*/\1/p' <<<"$last")
    elapsed=$(sed -n 's/.*Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
    corpus=$(find "$root/.fuzz-work/$target" -type f | wc -l)
    crashes=$(find "$root/.fuzz-crashes/$target" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
    [ "$crashes" -gt 0 ] && status=1
    printf '%-13s %9s %12s %7s %7s %8s %8s\n' "$target" "${elapsed:-?}" "${executions:-?}" "${cov:-?}" "${ft:-?}" "$corpus" "$crashes"
done
if [ "$status" = 1 ]; then
    echo
    echo "crashes are in .fuzz-crashes/<target>/ (the log names each); minimise one with"
    echo "  $bin/fuzz-TARGET -minimize_crash=1 -runs=100000 -exact_artifact_path=min CRASH"
    echo "and keep it in Fuzz/regressions/TARGET/ (PushFuzzTests replays that folder)."
fi
exit $status
