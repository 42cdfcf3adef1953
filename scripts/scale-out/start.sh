#!/usr/bin/env bash
# scripts/scale-out/start.sh: one pool served by three switchyard gateways
# behind nginx (or HAProxy), sharing state through one redis-server, all
# on this host's loopback (docs/scale-out.md, "Three instances behind a
# proxy"). Runs in the foreground until Ctrl-C, then stops what it started.
#
#   scripts/scale-out/start.sh [WORKDIR]        (default /tmp/switchyard-scale-out)
#
#   SWITCHYARD=path   the binary (default build/switchyard of this checkout)
#   PROXY=nginx|haproxy (default nginx)
#   REDIS_PORT=6390   the redis-server's port
#
# Ports: the proxy 8100, the gateways 8101-8103. Each gateway has its own
# database (WORKDIR/g1.db ...); add accounts and keys to any one of them
# (switchyard account add --db WORKDIR/g1.db ...) and all three serve them.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
SY="${SWITCHYARD:-$HERE/../../build/switchyard}"
WORK="${1:-/tmp/switchyard-scale-out}"
PROXY="${PROXY:-nginx}"
REDIS_PORT="${REDIS_PORT:-6390}"
URL="redis://127.0.0.1:$REDIS_PORT/0?pool=example"

[ -x "$SY" ] || { echo "no switchyard binary at $SY (build it, or set SWITCHYARD)" >&2; exit 1; }
for c in redis-server "$PROXY"; do
  command -v "$c" >/dev/null || { echo "$c is not installed (apt-get install ${c/redis-server/redis-server})" >&2; exit 1; }
done
mkdir -p "$WORK/tmp"
chmod 700 "$WORK" # the databases and Redis's file hold the accounts' tokens

PIDS=()
stop() {
  trap - EXIT INT TERM
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  echo "stopped (kept $WORK)"
}
trap stop EXIT
trap 'exit 130' INT TERM

# Redis with its append-only file: the pool's shared rows survive a restart of the example
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$WORK" --appendonly yes --save "" \
  >"$WORK/redis.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" PING >/dev/null 2>&1 && break; sleep 0.1; done

for i in 1 2 3; do
  SWITCHYARD_REDIS="$URL" "$SY" serve --db "$WORK/g$i.db" --listen "127.0.0.1:810$i" >>"$WORK/g$i.log" 2>&1 &
  PIDS+=($!)
done

if [ "$PROXY" = haproxy ]; then
  haproxy -f "$HERE/haproxy.cfg" >"$WORK/haproxy.log" 2>&1 &
else
  nginx -p "$WORK" -c "$HERE/nginx.conf" >"$WORK/nginx.log" 2>&1 &
fi
PIDS+=($!)

for i in 1 2 3; do
  for _ in $(seq 100); do curl -fsS -o /dev/null "http://127.0.0.1:810$i/health" 2>/dev/null && break; sleep 0.05; done
done
echo "serving on http://127.0.0.1:8100 ($PROXY -> gateways 8101-8103, redis $URL); logs in $WORK; Ctrl-C stops"
wait -n "${PIDS[@]}" || true
echo "a process ended (see the logs in $WORK)" >&2
