#!/usr/bin/env bash
# Creates per second through the REST API: a release server on a temporary SQLite store, driven
# by wrk (Debian package) with distinct subscriptions. Usage: scripts/bench-api.sh [seconds] [connections]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
connections=${2:-16}
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
secret="bench-secret-of-at-least-thirty-two-bytes"
port=18080
cat > "$work/pushdispatch.yaml" <<YAML
store: {sqlite: ./bench.db}
http: {port: $port}
apps:
  toto:
    auth: {hs256Secret: "$secret"}
YAML
.build/release/pushdispatch run --config "$work/pushdispatch.yaml" --log-level warning &
server=$!
for _ in $(seq 50); do curl -s "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
export BENCH_TOKEN=$(python3 -c "
from joserfc import jwt; from joserfc.jwk import OctKey; import time
print(jwt.encode({'alg': 'HS256'}, {'sub': 'u1', 'exp': int(time.time()) + 3600}, OctKey.import_key('$secret')))")
wrk -t2 -c"$connections" -d"${seconds}s" -s scripts/bench-api.lua "http://127.0.0.1:$port"
echo "subscriptions stored: $(sqlite3 "$work/bench.db" 'SELECT count(*) FROM subscription')"
