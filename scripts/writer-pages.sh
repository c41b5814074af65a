#!/usr/bin/env bash
# The pages SQLite's single writer writes while the service delivers, by table and index
# (docs/benchmarks.md, issue 35): runs `pushdispatch-bench e2e --tls`, and between the FROM-th and
# the TO-th delivery holds a read snapshot on the service's store, so that the WAL is not
# restarted and keeps every frame written meanwhile; then copies it and attributes each frame
# (scripts/wal_pages.py).
# Usage: scripts/writer-pages.sh RECORDS FROM TO [more e2e options, e.g. --bin OTHER]
# Needs the release build (`swift build -c release`), nginx and h2load, and ../shared/bench.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { sed -n '2,8p' "$0"; exit 2; }
records=$1 from=$2 to=$3
shift 3
for number in "$records" "$from" "$to"; do
    [[ "$number" =~ ^[1-9][0-9]{0,8}$ ]] || { echo "RECORDS, FROM and TO: expected whole numbers from 1 to 999,999,999, got '${number:0:40}'" >&2; exit 2; }
done
[ "$from" -lt "$to" ] && [ "$to" -le "$records" ] || { echo "expected FROM < TO <= RECORDS, got $from, $to, $records" >&2; exit 2; }
bench=${BENCH:-.build/release/pushdispatch-bench}
peer=${PEER:-../shared/bench}
work=$(mktemp -d)
holder=
bench_pid=
# On an early exit, the benchmark (and with it the service it started) and the reader go too.
trap '[ -n "$holder" ] && kill "$holder" 2>/dev/null; [ -n "$bench_pid" ] && kill "$bench_pid" 2>/dev/null; rm -rf "$work"' EXIT
before=$(ls -d "${TMPDIR:-/tmp}"/pushdispatch-e2e-* 2>/dev/null | sort || true)
"$bench" e2e --tls --no-peer --peer "$peer" --records "$records" "$@" > "$work/e2e.log" 2>&1 &
bench_pid=$!
folder=
for _ in $(seq 1 600); do
    folder=$(comm -13 <(echo "$before") <(ls -d "${TMPDIR:-/tmp}"/pushdispatch-e2e-* 2>/dev/null | sort) | head -1)
    [ -n "$folder" ] && [ -f "$folder/pushdispatch.yaml" ] && break
    sleep 0.1
done
[ -n "$folder" ] || { echo "the benchmark made no service folder:" >&2; cat "$work/e2e.log" >&2; exit 1; }
port=$(grep -o "port: [0-9]*" "$folder/pushdispatch.yaml" | head -1 | cut -d' ' -f2)
delivered() {
    curl -s "http://127.0.0.1:$port/metrics" | awk '/^pushdispatch_deliveries_total\{.*delivered/ {s += $2} END {print s + 0}'
}
wait_for() {
    while [ "$(delivered)" -lt "$1" ]; do
        kill -0 "$bench_pid" 2>/dev/null || { echo "the benchmark ended before $1 deliveries:" >&2; cat "$work/e2e.log" >&2; exit 1; }
        sleep 0.05
    done
}
wait_for "$from"
# A reader's snapshot: the WAL cannot restart while it holds it. The window's first frame is the
# WAL's count of committed frames just after the snapshot was taken (the file's length is not:
# a restarted WAL is overwritten from its start, not truncated).
python3 -c "
import sqlite3, subprocess, sys, os, time
c = sqlite3.connect('$folder/store.db', isolation_level=None)
c.execute('BEGIN'); c.execute('SELECT count(*) FROM sqlite_schema').fetchall()
print(subprocess.run([sys.executable, 'scripts/wal_pages.py', '--frames', '$folder/store.db-wal'], capture_output=True, text=True, check=True).stdout.strip(), flush=True)
while not os.path.exists('$work/release'): time.sleep(0.02)
" > "$work/first" &
holder=$!
while [ ! -s "$work/first" ]; do
    kill -0 "$holder" 2>/dev/null || { echo "the reader holding the WAL stopped" >&2; exit 1; }
    sleep 0.02
done
at=$(delivered)
wait_for "$to"
mkdir -p "$work/copy"
cp "$folder/store.db-wal" "$work/copy/store.db-wal"
cp "$folder/store.db" "$work/copy/store.db"
until=$(delivered)
touch "$work/release"
wait "$holder" || true
holder=
echo "deliveries $at → $until while the frames were kept"
python3 scripts/wal_pages.py "$work/copy/store.db" "$work/copy/store.db-wal" "$(cat "$work/first")"
wait "$bench_pid" || true
bench_pid=
grep "deliveries/s" "$work/e2e.log" || true
