#!/usr/bin/env bash
# bench/instructions.sh: user-space instructions per request, counted by
# valgrind's callgrind, for the mock upstream alone, bench/floor_proxy and
# the gateway (all threads), plain and streamed chat completions; on
# request also for the peer proxies of bench/peers.sh (nginx, Portkey).
#
#   bench/instructions.sh [BINARY]     (default: the Release build's switchyard)
#   BENCH_TARGETS="gateway nginx portkey" bench/instructions.sh
#                                      (targets: mock floor gateway nginx portkey;
#                                      default "mock floor gateway")
#   BENCH_ACCOUNT_ARGS="--max-concurrency 64" BENCH_TARGETS=gateway bench/instructions.sh
#                                      (the gateway's account made with these flags too)
#   BENCH_KEY_ARGS="--rpm 1000000" ... (its platform key made with these `key add` flags)
#   BENCH_API=messages BENCH_TARGETS=gateway bench/instructions.sh
#                                      (the client's dialect: chat (default), responses, or
#                                      messages, the Anthropic Messages API translated to
#                                      the account's: a translated request's cost)
#
# Timings on a shared two-core VM swing by a factor of two from one minute to
# the next; instruction counts do not (within about 1 %), so this is the
# figure to compare two builds with. Kernel time (system calls, wake-ups) is
# not counted. Each target serves N1 and then N2 sequential keep-alive
# requests from one client in two fresh processes; (I(N2) - I(N1)) / (N2 - N1)
# leaves start-up and shutdown out. Portkey is the exception: Node.js takes
# about 25 s to start under callgrind and its JIT needs requests to warm up,
# so one process per run serves W warm-up requests of each kind, then its
# counters are zeroed (callgrind_control -z), it serves N more and they are
# dumped (-d): I / N (BENCH_INSTR_PORTKEY_WARM, default 100;
# BENCH_INSTR_PORTKEY_N, default 150). 127.0.0.1 only; about 2 minutes for
# the default targets, 2 more with nginx and Portkey; prints figures only.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
N1=200
N2=1200
TARGETS="${BENCH_TARGETS:-mock floor gateway}"
PK_WARM="${BENCH_INSTR_PORTKEY_WARM:-100}"
PK_N="${BENCH_INSTR_PORTKEY_N:-150}"
LOGTAG=instr
BENCH_EXTRA_PKGS="valgrind:valgrind ${BENCH_EXTRA_PKGS:-}"
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"   # builds, installs tools, starts a mock and a gateway we do not use here
# shellcheck source=bench/proxies.sh
. "$ROOT/bench/proxies.sh"
SYBIN="${1:-$SY}"
WAIT_SECONDS=120 # servers start slowly under valgrind
case " $TARGETS " in *" nginx "*) nginx_find ;; esac
case " $TARGETS " in *" portkey "*) portkey_find ;; esac

# client: N sequential requests on one connection; every answer must be 200
drive() { # port n stream(0/1) headers ("Name: value" lines)
  python3 - "$@" <<'EOF'
import http.client, sys
port, n, stream = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
import os
api = os.environ.get("BENCH_API", "chat")
s = '"stream":true,' if stream else ""
path, body = {
    "chat": ("/v1/chat/completions", '{"model":"gpt-bench",%s"messages":[{"role":"user","content":"Say hello."}]}' % s),
    "responses": ("/v1/responses", '{"model":"gpt-bench",%s"input":"Say hello."}' % s),
    "messages": ("/v1/messages", '{"model":"gpt-bench","max_tokens":256,%s"messages":[{"role":"user","content":"Say hello."}]}' % s),
}[api]
hdrs = {"Content-Type": "application/json"}
for line in sys.argv[4].split("\n"):
    if ":" in line:
        k, v = line.split(":", 1)
        hdrs[k.strip()] = v.strip()
c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
for _ in range(n):
    c.request("POST", path, body, hdrs)
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

# one measurement: target (mock|floor|gateway|nginx), requests, stream -> instructions
measure() {
  local target=$1 n=$2 stream=$3 port pid out="$WORK/cg.$1.$2.$3" hdrs=""
  port=$(free_port)
  case "$target" in
    nginx) nginx_start "$UPORT" valgrind --tool=callgrind --callgrind-out-file="$out" >/dev/null
           pid=$NG_PID port=$NG_PORT ;;
    mock) valgrind --tool=callgrind --callgrind-out-file="$out" "$FU" --host "$HOST" --port "$port" \
            >"$WORK/vg.log" 2>&1 & pid=$! ;;
    floor) valgrind --tool=callgrind --callgrind-out-file="$out" "$FLOOR_BIN" --port "$port" \
             --upstream "http://$HOST:$UPORT/acct/bench/ok" >"$WORK/vg.log" 2>&1 & pid=$! ;;
    gateway)
      local db="$WORK/instr-$n-$stream.db"
      # shellcheck disable=SC2086 # BENCH_ACCOUNT_ARGS: more `account add` flags, split on spaces
      "$SYBIN" account add --db "$db" --name bench --base-url "$BASE" --token bench-upstream-token \
        ${BENCH_ACCOUNT_ARGS:-} >/dev/null
      # shellcheck disable=SC2086 # BENCH_KEY_ARGS likewise
      hdrs="Authorization: Bearer $("$SYBIN" key add --db "$db" --name bench ${BENCH_KEY_ARGS:-} | tail -n 1)"
      # with SWITCHYARD_REDIS, a pool of its own: in the bench's other gateway's pool the pool's row of
      # the account (without BENCH_ACCOUNT_ARGS) would replace this one's (docs/scale-out.md)
      local redis="${SWITCHYARD_REDIS:-}"
      [ -n "$redis" ] && case "$redis" in *\?*) redis="$redis&pool=instr-$n-$stream" ;; *) redis="$redis?pool=instr-$n-$stream" ;; esac
      SWITCHYARD_REDIS="$redis" valgrind --tool=callgrind --callgrind-out-file="$out" "$SYBIN" serve --db "$db" \
        --listen "$HOST:$port" >"$WORK/vg.log" 2>&1 & pid=$! ;;
  esac
  wait_port "$port"
  drive "$port" "$n" "$stream" "$hdrs" || { log "$target: a request failed"; kill "$pid"; exit 1; }
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  total_ir "$out"
}

# Portkey: one process, warm-up, then counters zeroed, N requests, dumped;
# prints "plain stream" instructions per request
measure_portkey() {
  local out="$WORK/cg.portkey" stream dump=0 res=()
  portkey_start "$UPORT" valgrind --tool=callgrind --callgrind-out-file="$out"
  for stream in 0 1; do
    log "portkey, stream=$stream: $PK_WARM warm-up + $PK_N counted requests"
    drive "$PK_PORT" "$PK_WARM" "$stream" "$PK_HEADERS" || { log "portkey: a request failed"; exit 1; }
    callgrind_control -z "$PK_PID" >/dev/null
    drive "$PK_PORT" "$PK_N" "$stream" "$PK_HEADERS" || { log "portkey: a request failed"; exit 1; }
    callgrind_control -d "$PK_PID" >/dev/null
    dump=$((dump + 1))
    for _ in $(seq 100); do [ -s "$out.$dump" ] && break; sleep 0.1; done # written when -d returns
    res+=("$(( $(total_ir "$out.$dump") / PK_N ))")
  done
  proxy_stop "$PK_PID"
  echo "${res[0]} ${res[1]}"
}

echo "user-space instructions per request (callgrind, all threads; ${N1} vs ${N2} sequential requests, 1 client)"
echo "gateway: $SYBIN"
printf '%-8s %14s %14s\n' target plain stream
for target in $TARGETS; do
  if { [ "$target" = nginx ] && [ -z "$NGINX_BIN" ]; } || { [ "$target" = portkey ] && [ -z "$PORTKEY_JS" ]; }; then
    printf '%-8s %14s %14s\n' "$target" - -
    continue
  fi
  if [ "$target" = portkey ]; then
    read -r a b < <(measure_portkey)
    printf '%-8s %14s %14s\n' "$target" "$a" "$b"
    continue
  fi
  row=()
  for stream in 0 1; do
    log "$target, stream=$stream"
    a=$(measure "$target" "$N1" "$stream")
    b=$(measure "$target" "$N2" "$stream")
    row+=("$(( (b - a) / (N2 - N1) ))")
  done
  printf '%-8s %14s %14s\n' "$target" "${row[0]}" "${row[1]}"
done
case " $TARGETS " in *" floor "*)
  echo "(floor: bench/floor_proxy, no streaming of its own; it answers once the upstream is done)" ;; esac
case " $TARGETS " in *" portkey "*)
  echo "(portkey: counted over $PK_N requests after $PK_WARM of warm-up, in one process)" ;; esac
log "done"
