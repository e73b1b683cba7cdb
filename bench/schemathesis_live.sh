#!/usr/bin/env bash
# Schemathesis CLI against a live `dpwatch serve` (API and worker, SQLite), every check
# (results in docs/hardening.md, "Schemathesis CLI against a live server"). Run from the repository root, as root:
#
#     bash bench/schemathesis_live.sh [PORT] [MAX_EXAMPLES]
#
# Everything runs in a network namespace of its own with only loopback (`unshare --net`): the
# fuzzer registers mechanisms and webhooks at generated URLs, allowed by
# DPWATCH_ALLOW_NETWORKS=0.0.0.0/0,::/0 so that schemathesis' IP literals are not refused, and
# the worker and `?validate=true` would otherwise call them. Inside, no packet can leave.
# The database is Postgres through its Unix socket (reachable from the namespace), in the
# database DPWATCH_FUZZ_DB (default dpwatch_bench_hostile, dropped and made anew); set
# DPWATCH_FUZZ_SQLITE=1 to use a SQLite file instead.
set -euo pipefail
PORT="${1:-21080}"
EXAMPLES="${2:-25}"
if [[ -z "${DPWATCH_FUZZ_NETNS:-}" ]]; then
    exec unshare --net env DPWATCH_FUZZ_NETNS=1 bash "$0" "$@"
fi
ip link set lo up
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d /tmp/dpwatch-fuzz-XXXXXX)"
if [[ -n "${DPWATCH_FUZZ_SQLITE:-}" ]]; then
    export DPWATCH_DATABASE_URL="sqlite:///$WORK/fuzz.sqlite3"
else
    DB="${DPWATCH_FUZZ_DB:-dpwatch_bench_hostile}"
    psql -h /var/run/postgresql -U postgres -q -c "DROP DATABASE IF EXISTS \"$DB\" WITH (FORCE)" -c "CREATE DATABASE \"$DB\"" postgres
    export DPWATCH_DATABASE_URL="postgresql+psycopg://postgres@/$DB?host=/var/run/postgresql"
fi
export DPWATCH_ALLOW_NETWORKS="0.0.0.0/0,::/0"
export DPWATCH_LOG_LEVEL=WARNING
"$ROOT/.venv/bin/dpwatch" migrate >/dev/null
KEY="$("$ROOT/.venv/bin/dpwatch" keys create --tenant fuzz 2>/dev/null | tail -1)"
"$ROOT/.venv/bin/dpwatch" serve --port "$PORT" >"$WORK/serve.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do
    curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break
    sleep 0.5
done
set +e
"$ROOT/.venv/bin/schemathesis" run "http://127.0.0.1:$PORT/openapi.json" \
    --checks all \
    --header "Authorization: Bearer $KEY" \
    --max-examples "$EXAMPLES" \
    --workers 1 \
    --seed 17 \
    --request-timeout 30 \
    --report junit --report-dir "$WORK/report" \
    --no-color
STATUS=$?
set -e
echo "server log: $WORK/serve.log (lines with 'error': $(grep -c '"level": "error"' "$WORK/serve.log" || true)); report: $WORK/report"
exit "$STATUS"
