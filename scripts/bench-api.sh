#!/usr/bin/env bash
# Creates per second through the REST API: a release server on a temporary SQLite store, driven
# by wrk (Debian package) with distinct subscriptions; run twice side by side, without read rules
# and then with rules that read the tree at every create (SPEC §12).
# Usage: scripts/bench-api.sh [seconds] [connections]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-16}
work=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
secret="bench-secret-of-at-least-thirty-two-bytes"
port=18080
# 2,000 users, one token each: every create is a distinct subscription of one of them, and no
# user reaches subscriptions.maxPerUser (100) within a run of ~190,000 creates.
users=2000
export BENCH_TOKENS="$work/tokens.txt"
python3 -c "
from joserfc import jwt; from joserfc.jwk import OctKey; import time
key = OctKey.import_key('$secret')
for n in range($users):
    print(jwt.encode({'alg': 'HS256'}, {'sub': 'u%d' % n, 'exp': int(time.time()) + 3600}, key))" > "$BENCH_TOKENS"

# $1: a name; $2: the lines under apps.toto (indented four spaces).
measure() {
    mkdir -p "$work/$1"
    cat > "$work/$1/pushdispatch.yaml" <<YAML
store: {sqlite: ./bench.db}
http: {port: $port}
apps:
  toto:
    auth: {hs256Secret: "$secret"}
$2
YAML
    .build/release/pushdispatch run --config "$work/$1/pushdispatch.yaml" --log-level error &
    server=$!
    for _ in $(seq 50); do curl -s "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
    echo "== $1"
    wrk -t2 -c"$connections" -d"${seconds}s" -s scripts/bench-api.lua "http://127.0.0.1:$port"
    echo "subscriptions stored: $(sqlite3 "$work/$1/bench.db" 'SELECT count(*) FROM subscription')"
    kill "$server"; wait "$server" 2>/dev/null || true; server=
}

measure "no rules" ""
# Own subtree, unless the account is disabled: every create evaluates both sides and reads
# /users/u1/disabled in the tree the service keeps.
measure "read rules" "    rules: {rules: {users: {\$uid: {.read: \"auth.uid == \$uid && root.child('users').child(\$uid).child('disabled').val() != true\"}}}}"
