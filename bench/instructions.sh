#!/usr/bin/env bash
# bench/instructions.sh: user-space instructions per request, counted by
# valgrind's callgrind, for the mock upstream alone, bench/floor_proxy and
# the gateway (all threads), plain and streamed chat completions.
#
#   bench/instructions.sh [BINARY]     (default: the Release build's switchyard)
#
# Timings on a shared two-core VM swing by a factor of two from one minute to
# the next; instruction counts do not (within about 1 %), so this is the
# figure to compare two builds with. Kernel time (system calls, wake-ups) is
# not counted. Each target serves N1 and then N2 sequential keep-alive
# requests from one client in two fresh processes; (I(N2) - I(N1)) / (N2 - N1)
# leaves start-up and shutdown out. 127.0.0.1 only; about 2 minutes; prints
# figures only.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
N1=200
N2=1200
LOGTAG=instr
BENCH_EXTRA_PKGS="valgrind:valgrind ${BENCH_EXTRA_PKGS:-}"
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"   # builds, installs tools, starts a mock and a gateway we do not use here
SYBIN="${1:-$SY}"

# client: N sequential requests on one connection; every answer must be 200
drive() { # port n stream(0/1) key
  python3 - "$@" <<'EOF'
import http.client, sys
port, n, stream, key = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
body = '{"model":"gpt-bench",%s"messages":[{"role":"user","content":"Say hello."}]}' % ('"stream":true,' if stream else "")
hdrs = {"Content-Type": "application/json"}
if key:
    hdrs["Authorization"] = "Bearer " + key
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for _ in range(n):
    c.request("POST", "/v1/chat/completions", body, hdrs)
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit("status %d" % r.status)
EOF
}

total_ir() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ && !n++ {gsub(",", "", $1); print $1}'; }

wait_port() {
  local i
  for ((i = 0; i < 200; i++)); do
    python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), 0.2)" 2>/dev/null && return 0
    sleep 0.05
  done
  log "nothing listens on $1"; return 1
}

# one measurement: target (mock|floor|gateway), requests, stream -> instructions
measure() {
  local target=$1 n=$2 stream=$3 port pid out="$WORK/cg.$1.$2.$3" key=""
  port=$(free_port)
  case "$target" in
    mock) valgrind --tool=callgrind --callgrind-out-file="$out" "$FU" --host "$HOST" --port "$port" \
            >"$WORK/vg.log" 2>&1 & pid=$! ;;
    floor) valgrind --tool=callgrind --callgrind-out-file="$out" "$FLOOR_BIN" --port "$port" \
             --upstream "http://$HOST:$UPORT/acct/bench/ok" >"$WORK/vg.log" 2>&1 & pid=$! ;;
    gateway)
      local db="$WORK/instr-$n-$stream.db"
      "$SYBIN" account add --db "$db" --name bench --base-url "$BASE" --token bench-upstream-token >/dev/null
      key=$("$SYBIN" key add --db "$db" --name bench | tail -n 1)
      valgrind --tool=callgrind --callgrind-out-file="$out" "$SYBIN" serve --db "$db" --listen "$HOST:$port" \
        >"$WORK/vg.log" 2>&1 & pid=$! ;;
  esac
  wait_port "$port"
  drive "$port" "$n" "$stream" "$key" || { log "$target: a request failed"; kill "$pid"; exit 1; }
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  total_ir "$out"
}

echo "user-space instructions per request (callgrind, all threads; ${N1} vs ${N2} sequential requests, 1 client)"
echo "gateway: $SYBIN"
printf '%-8s %14s %14s\n' target plain stream
for target in mock floor gateway; do
  row=()
  for stream in 0 1; do
    log "$target, stream=$stream"
    a=$(measure "$target" "$N1" "$stream")
    b=$(measure "$target" "$N2" "$stream")
    row+=("$(( (b - a) / (N2 - N1) ))")
  done
  printf '%-8s %14s %14s\n' "$target" "${row[0]}" "${row[1]}"
done
echo "(floor: bench/floor_proxy, no streaming of its own; it answers once the upstream is done)"
log "done"
