#!/usr/bin/env bash
# Load benchmark of `serve` on PostgreSQL with wrk (Debian's package), on loopback:
#   GET  /v1/schedules/{id}  and  POST /v1/schedules,
# plus the resident memory of the idle process. Prints a Markdown table.
#
# serve reaches PostgreSQL over loopback without TLS (DB_PARAMS=?sslmode=disable, as a co-located
# deployment would; DB_PARAMS= keeps the driver default, TLS when the server offers it).
#
# Then the cost of unauthenticated polling: the median of one authenticated client listing
#   GET  /v1/schedules  alone, and while FLOOD (40) unauthenticated clients hammer /v1/health.
#
# Then tenant isolation (PARTS=tenants): tenant B's one client listing its schedules alone,
# and while tenant A's FLOOD_A (50) clients list theirs as fast as they can, with the rate
# limits off and with the default limits (A should see 429s, not timeouts, and B keep its pace).
# The crud and health parts measure raw capacity, so they run with the rate limits off.
#
# Run: benches/api_load.sh   (PostgreSQL at SENTIN8_CRON_BENCH_DATABASE_URL, default
# postgres://postgres@127.0.0.1:5432/postgres; about a minute after the release build).
# PARTS="health" runs the polling measurement alone, PARTS=tenants the tenant flood; BIN=path
# measures another build.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-15s}
CONNECTIONS=${CONNECTIONS:-32}
FLOOD=${FLOOD:-40}
FLOOD_A=${FLOOD_A:-50}
PARTS=${PARTS:-crud health}
PORT=${PORT:-18089}
ADMIN=${SENTIN8_CRON_BENCH_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
HOSTPART=${ADMIN#*@}; HOSTPART=${HOSTPART%%/*}
DB=s8c_bench_api

command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk; }
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=${CARGO_TARGET_DIR:-target}/release/sentin8-cron
fi

psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
"$BIN" migrate --database-url "postgres://postgres@$HOSTPART/$DB" >/dev/null

SECRET=$(head -c 48 /dev/urandom | base64 | tr -d '\n')
# token SUB ENV_ID: an HS256 token with the write scope for one environment.
token() {
  SECRET="$SECRET" SUB="$1" ENV_ID="$2" python3 - <<'PY'
import base64, hashlib, hmac, json, os, time
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
claims = b64(json.dumps({"sub": os.environ["SUB"], "scope": "sentin8:cron:write", "envs": [os.environ["ENV_ID"]],
                         "iat": int(time.time()), "exp": int(time.time()) + 3600}).encode())
signature = hmac.new(os.environ["SECRET"].encode(), f"{header}.{claims}".encode(), hashlib.sha256).digest()
print(f"{header}.{claims}.{b64(signature)}")
PY
}
ENV_ID=$(python3 -c 'import uuid; print(uuid.uuid4())')
TOKEN=$(token bench "$ENV_ID")

LOG=$(mktemp)
# Outside development mode serve signs calls with a configured key, and the schedules' target
# must be on the egress allow list.
KEY=$(mktemp --suffix=.pem)
openssl genpkey -algorithm ed25519 -out "$KEY"
chmod 600 "$KEY"
PID=
# start_serve PER_CLIENT PER_ENV: (re)starts serve with these request rate limits (0: none).
start_serve() {
  if [ -n "$PID" ]; then kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; fi
  SENTIN8_CRON_JWT_HS256_SECRET="$SECRET" RUST_LOG=warn SENTIN8_CRON_DB_POOL_SIZE=${POOL:-8} \
    SENTIN8_CRON_SIGNING_KEY_FILE="$KEY" SENTIN8_CRON_TARGET_ALLOW=http://127.0.0.1:9 \
    SENTIN8_CRON_RATE_LIMIT_PER_CLIENT="$1" SENTIN8_CRON_RATE_LIMIT_PER_ENV="$2" \
    "$BIN" serve --listen "127.0.0.1:$PORT" \
    --database-url "postgres://sentin8_cron_service@$HOSTPART/$DB${DB_PARAMS-?sslmode=disable}" >"$LOG" 2>&1 &
  PID=$!
  for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/v1/health" >/dev/null && break; sleep 0.2; done
  sleep 2
}
trap 'kill $PID 2>/dev/null; rm -f "$KEY"; psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null' EXIT
start_serve 0 0
RSS_IDLE=$(ps -o rss= -p $PID | tr -d ' ')

BODY='{"domain":"bench","schedule_type":"seed","cron":"*/5 * * * *","target_config":{"baseUrl":"http://127.0.0.1:9"}}'
ID=$(curl -sf -X POST "http://127.0.0.1:$PORT/v1/schedules?target_env_id=$ENV_ID" \
  -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -d "$BODY" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')

LUA=$(mktemp --suffix=.lua)
cat >"$LUA" <<LUA
local counter = 0
local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
function request()
  counter = counter + 1
  local body = string.format('{"domain":"bench","schedule_type":"load-%d-%d","cron":"*/5 * * * *","target_config":{"baseUrl":"http://127.0.0.1:9"}}', tid, counter)
  return wrk.format("POST", "/v1/schedules?target_env_id=$ENV_ID",
    {["Authorization"] = "Bearer $TOKEN", ["Content-Type"] = "application/json"}, body)
end
LUA

summarise() { # wrk output → "requests/s p50 p99 non-2xx"
  awk '/Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} /Non-2xx/ {bad=$5}
       END {printf "%s %s %s %s\n", rps, p50, p99, (bad == "" ? 0 : bad)}'
}

if [[ " $PARTS " == *" health "* ]]; then
  LIST="http://127.0.0.1:$PORT/v1/schedules?target_env_id=$ENV_ID"
  QUIET_OUT=$(wrk -t1 -c1 -d"$DURATION" --latency -H "Authorization: Bearer $TOKEN" "$LIST")
  wrk -t2 -c"$FLOOD" -d"$(( ${DURATION%s} + 4 ))s" "http://127.0.0.1:$PORT/v1/health" >/dev/null &
  FLOOD_PID=$!
  sleep 2
  FLOODED_OUT=$(wrk -t1 -c1 -d"$DURATION" --latency -H "Authorization: Bearer $TOKEN" "$LIST")
  wait $FLOOD_PID
  read -r _ QUIET_P50 QUIET_P99 QUIET_BAD <<<"$(summarise <<<"$QUIET_OUT")"
  read -r _ FLOODED_P50 FLOODED_P99 FLOODED_BAD <<<"$(summarise <<<"$FLOODED_OUT")"
  echo "| GET /v1/schedules (1 client) | p50 | p99 | non-2xx |"
  echo "|---|---|---|---|"
  echo "| alone | $QUIET_P50 | $QUIET_P99 | $QUIET_BAD |"
  echo "| while $FLOOD clients poll /v1/health | $FLOODED_P50 | $FLOODED_P99 | $FLOODED_BAD |"
  echo
fi
if [[ " $PARTS " == *" tenants "* ]]; then
  ENV_A=$(python3 -c 'import uuid; print(uuid.uuid4())')
  ENV_B=$(python3 -c 'import uuid; print(uuid.uuid4())')
  TOKEN_A=$(token tenant-a "$ENV_A")
  TOKEN_B=$(token tenant-b "$ENV_B")
  for env_token in "$ENV_A $TOKEN_A" "$ENV_B $TOKEN_B"; do
    read -r env tok <<<"$env_token"
    for n in 1 2 3 4 5; do
      curl -sf -o /dev/null -X POST "http://127.0.0.1:$PORT/v1/schedules?target_env_id=$env" \
        -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' \
        -d "{\"domain\":\"bench\",\"schedule_type\":\"t$n\",\"cron\":\"*/5 * * * *\",\"target_config\":{\"baseUrl\":\"http://127.0.0.1:9\"}}"
    done
  done
  # Tenant B is a well-behaved client: one request every 20 ms (50/s, inside its limits).
  PACED=$(mktemp --suffix=.lua)
  echo 'function delay() return 20 end' >"$PACED"
  LIST_A="http://127.0.0.1:$PORT/v1/schedules?target_env_id=$ENV_A"
  LIST_B="http://127.0.0.1:$PORT/v1/schedules?target_env_id=$ENV_B"
  echo "| tenant B's GET /v1/schedules (1 client, 50/s) | B p50 | B p99 | B non-2xx | A requests/s | A 429s | A timeouts |"
  echo "|---|---|---|---|---|---|---|"
  for limits in "0 0" "default"; do
    if [ "$limits" = default ]; then start_serve 100 200; label="A floods ($FLOOD_A clients), default limits"
    else start_serve 0 0; label="A floods ($FLOOD_A clients), no limits"; fi
    QUIET_OUT=$(wrk -t1 -c1 -d"$DURATION" --latency -s "$PACED" -H "Authorization: Bearer $TOKEN_B" "$LIST_B")
    read -r _ QUIET_P50 QUIET_P99 QUIET_BAD <<<"$(summarise <<<"$QUIET_OUT")"
    echo "| alone ($([ "$limits" = default ] && echo default limits || echo no limits)) | $QUIET_P50 | $QUIET_P99 | $QUIET_BAD | | | |"
    A_OUT_FILE=$(mktemp)
    wrk -t2 -c"$FLOOD_A" -d"$(( ${DURATION%s} + 4 ))s" --timeout 10s --latency -H "Authorization: Bearer $TOKEN_A" "$LIST_A" >"$A_OUT_FILE" &
    A_PID=$!
    sleep 2
    B_OUT=$(wrk -t1 -c1 -d"$DURATION" --latency -s "$PACED" -H "Authorization: Bearer $TOKEN_B" "$LIST_B")
    wait $A_PID
    read -r _ B_P50 B_P99 B_BAD <<<"$(summarise <<<"$B_OUT")"
    read -r A_RPS _ _ A_BAD <<<"$(summarise <"$A_OUT_FILE")"
    A_TIMEOUTS=$(awk '/Socket errors/ {gsub(",", ""); print $NF}' "$A_OUT_FILE")
    echo "| $label | $B_P50 | $B_P99 | $B_BAD | $A_RPS | $A_BAD | ${A_TIMEOUTS:-0} |"
    rm -f "$A_OUT_FILE"
  done
  echo
  start_serve 0 0
fi
[[ " $PARTS " == *" crud "* ]] || exit 0

GET_OUT=$(wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency \
  -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$PORT/v1/schedules/$ID?target_env_id=$ENV_ID")
POST_OUT=$(wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency -s "$LUA" "http://127.0.0.1:$PORT")
RSS_AFTER=$(ps -o rss= -p $PID | tr -d ' ')

read -r GET_RPS GET_P50 GET_P99 GET_BAD <<<"$(summarise <<<"$GET_OUT")"
read -r POST_RPS POST_P50 POST_P99 POST_BAD <<<"$(summarise <<<"$POST_OUT")"
echo "| request | requests/s | p50 | p99 | non-2xx |"
echo "|---|---|---|---|---|"
echo "| GET /v1/schedules/{id} | $GET_RPS | $GET_P50 | $GET_P99 | $GET_BAD |"
echo "| POST /v1/schedules | $POST_RPS | $POST_P50 | $POST_P99 | $POST_BAD |"
echo
echo "resident memory of serve: idle $((RSS_IDLE / 1024)) MiB, after the load $((RSS_AFTER / 1024)) MiB"
echo "(wrk: 2 threads, $CONNECTIONS connections, $DURATION per request type; serve, wrk and PostgreSQL share the machine)"
