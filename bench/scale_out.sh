#!/usr/bin/env bash
# bench/scale_out.sh: the throughput of two gateways behind nginx, sharing
# state through Redis, against one (docs/performance.md, "Two instances
# against one"). Uses bench/lib.sh's fast upstream, account and key; starts
# a redis-server and two gateways in Redis mode (the second with an empty
# database: it gets the account and the key from the pool), and nginx in
# front (a config like scripts/scale-out/nginx.conf). wrk (bench/post.lua)
# against: one gateway alone (local mode), one in Redis mode (the latency
# Redis mode adds: compare p50 at c=1), one in Redis mode behind nginx,
# and the two behind nginx. Prints figures only.
#
#   bench/scale_out.sh            BENCH_DURATION (s per run, default 7), BENCH_CLIENTS (default "1 64 256")
#
# On the two-core VM the proxy, the upstream, wrk and the gateways share
# two cores: what a second instance adds is bounded by the machine, not
# the gateway; run it where each instance has cores of its own to see the
# scaling itself.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LOGTAG=scale-out
BENCH_EXTRA_PKGS="${BENCH_EXTRA_PKGS:-} nginx:nginx redis-server:redis-server"
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
DUR="${BENCH_DURATION:-7}"
CLIENTS="${BENCH_CLIENTS:-1 64 256}"

RPORT=$(free_port)
redis-server --port "$RPORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do redis-cli -p "$RPORT" PING >/dev/null 2>&1 && break; sleep 0.1; done
URL="redis://127.0.0.1:$RPORT/0?pool=bench"

"$SY" backup --db "$DB" --out "$WORK/r1.db" >/dev/null
R1=$(free_port); R2=$(free_port)
SWITCHYARD_REDIS="$URL" SWITCHYARD_MAX_CONNECTIONS_PER_IP=0 "$SY" serve --db "$WORK/r1.db" --listen "$HOST:$R1" \
  >"$WORK/r1.log" 2>&1 &
R1PID=$!; PIDS+=("$R1PID")
wait_http "http://$HOST:$R1/health" 10
SWITCHYARD_REDIS="$URL" SWITCHYARD_MAX_CONNECTIONS_PER_IP=0 "$SY" serve --db "$WORK/r2.db" --listen "$HOST:$R2" \
  >"$WORK/r2.log" 2>&1 &
R2PID=$!; PIDS+=("$R2PID")
wait_http "http://$HOST:$R2/health" 10

nginx_conf() { # port upstream-ports...
  local port=$1; shift
  printf 'worker_processes 1; daemon off; pid nginx-%s.pid; error_log nginx-%s.err warn;\n' "$port" "$port"
  printf 'events { worker_connections 8192; }\nhttp { access_log off;\n'
  printf '  upstream gw { least_conn;'
  for p in "$@"; do printf ' server %s:%s;' "$HOST" "$p"; done
  printf ' keepalive 256; }\n'
  printf '  server { listen %s:%s; location / { proxy_pass http://gw; proxy_http_version 1.1;' "$HOST" "$port"
  printf ' proxy_set_header Connection ""; proxy_buffering off; } } }\n'
}
N1=$(free_port); N2=$(free_port)
nginx_conf "$N1" "$R1" >"$WORK/n1.conf"
nginx_conf "$N2" "$R1" "$R2" >"$WORK/n2.conf"
nginx -p "$WORK" -c "$WORK/n1.conf" >/dev/null 2>&1 &
PIDS+=($!)
nginx -p "$WORK" -c "$WORK/n2.conf" >/dev/null 2>&1 &
PIDS+=($!)
# the second gateway serves the first one's key once the pool reached it
for _ in $(seq 100); do
  curl -fsS -o /dev/null -X POST "http://$HOST:$R2/v1/chat/completions" -H "Authorization: Bearer $KEY" \
    -H 'Content-Type: application/json' -d "$BODY_PLAIN" 2>/dev/null && break
  sleep 0.1
done
check "http://$HOST:$R2/v1/chat/completions" "$BODY_PLAIN" 'x-switchyard-account: bench'
check "http://$HOST:$N2/v1/chat/completions" "$BODY_PLAIN" '"chat.completion"'

run() { # label url clients body
  local out
  out=$(BENCH_BODY="$4" BENCH_KEY="$KEY" wrk -t1 -c"$3" -d"$DUR"s --timeout 10s -s "$ROOT/bench/post.lua" "$2" 2>&1 |
        grep '^RESULT' || echo "RESULT rps=0 errors=-1")
  printf '%-34s c=%-4s %s\n' "$1" "$3" "$(sed 's/^RESULT //' <<<"$out")"
}
echo "scale-out: $(nproc) cores, ${DUR}s per run, wrk -t1; fast_upstream; gateways $(basename "$SY")"
for mode in plain stream; do
  if [ "$mode" = plain ]; then body=$BODY_PLAIN; else body=$BODY_STREAM; fi
  run "warm-up" "http://$HOST:$N2/v1/chat/completions" 64 "$body" >/dev/null
  for c in $CLIENTS; do
    run "$mode one gateway, local mode" "$GW" "$c" "$body"
    run "$mode one gateway, Redis mode" "http://$HOST:$R1/v1/chat/completions" "$c" "$body"
    run "$mode one gateway, Redis, nginx" "http://$HOST:$N1/v1/chat/completions" "$c" "$body"
    run "$mode two gateways, Redis, nginx" "http://$HOST:$N2/v1/chat/completions" "$c" "$body"
  done
done
