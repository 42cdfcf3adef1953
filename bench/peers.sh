#!/usr/bin/env bash
# bench/peers.sh: switchyard beside its peers, on the same upstream, in one run.
#
# Builds switchyard (Release) if needed and starts bench/fast_upstream; finds
# or installs the peers (bench/proxies.sh: nginx from Debian's package,
# Portkey's gateway from npm when Node.js is present; a peer that cannot be
# had is left out), then measures for direct (wrk -> upstream), switchyard,
# nginx and Portkey:
#   1. load: plain and streamed chat completions at 1 and 64 clients (wrk,
#      bench/post.lua), BENCH_REPEATS rounds of BENCH_DURATION s per cell,
#      the targets taking turns within each round: req/s, p50/p99 and the
#      proxy process's CPU (utime+stime from /proc/PID/stat, all threads)
#      per request; medians over the rounds;
#   2. system calls per request: strace -c -f on the proxy process during a
#      3 s wrk run at 64 clients (counts are exact; strace slows the process,
#      so the proxy batches more per loop turn than it would unobserved);
#   3. time to first byte: a second upstream answers every request 50 ms late
#      (fast_upstream --first-byte-ms); bench/peers_client.py ttfb measures
#      the time to the first body byte of streamed requests at 1 and 64
#      clients through each target (fresh proxies), in rounds as in 1;
#   4. memory: a third upstream holds every stream open (--hold-ms); a fresh
#      proxy of each kind gets BENCH_STREAMS streams at once and its VmRSS is
#      read while all are open (peers_client.py hold);
#   5. instructions per request: bench/instructions.sh for the same targets
#      (callgrind; the stable figure on a shared machine). BENCH_INSTRUCTIONS=0
#      skips it (it is about half of the run).
# Prints figures only, never fails on a timing. 127.0.0.1 only; kills what it
# started. About 7 minutes with the defaults (4 without instruction counts).
#
# Environment:
#   BENCH_BUILD_DIR      build directory (default /tmp/switchyard-bench-build)
#   BENCH_DURATION       seconds per wrk cell (default 3)
#   BENCH_REPEATS        rounds of load cells, medians taken (default 3)
#   BENCH_STREAMS        streams held open for the memory figure (default 1000)
#   BENCH_FIRST_BYTE_MS  the slow upstream's first-byte delay (default 50)
#   BENCH_PEERS          which proxies (default "switchyard nginx portkey")
#   BENCH_INSTRUCTIONS=0 no callgrind counts
#   BENCH_SWITCHYARD     gateway binary to measure instead of the one built here
#   BENCH_KEEP=1         keep the temporary directory (logs, raw results)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DUR="${BENCH_DURATION:-3}"
REPS="${BENCH_REPEATS:-3}"
NSTREAMS="${BENCH_STREAMS:-1000}"
FIRST_BYTE_MS="${BENCH_FIRST_BYTE_MS:-50}"
LOGTAG=peers
BENCH_EXTRA_PKGS="strace:strace ${BENCH_EXTRA_PKGS:-}"
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
# shellcheck source=bench/proxies.sh
. "$ROOT/bench/proxies.sh"
proxy_stop "$GPID" # lib.sh's gateway: every phase starts its own

PEERS=()
for p in ${BENCH_PEERS:-switchyard nginx portkey}; do
  case "$p" in
    switchyard) PEERS+=(switchyard) ;;
    nginx) nginx_find; [ -n "$NGINX_BIN" ] && PEERS+=(nginx) ;;
    portkey) portkey_find; [ -n "$PORTKEY_JS" ] && PEERS+=(portkey) ;;
    *) log "unknown peer $p"; exit 2 ;;
  esac
done
TARGETS=(direct "${PEERS[@]}")
RESULTS="$WORK/results.txt"
: >"$RESULTS"

echo "switchyard and its peers  $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)," \
     "load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)');" \
     "switchyard $SY"
[ -n "${NGINX_BIN:-}" ] && echo "nginx: $NGINX_BIN ($("$NGINX_BIN" -v 2>&1 | sed 's/.*version: //'))"
[ -n "${PORTKEY_JS:-}" ] && echo "Portkey: @portkey-ai/gateway $PORTKEY_VERSION, @hono/node-server $(node -p "require('$PORTKEY_DIR/node_modules/@hono/node-server/package.json').version"), node $(node --version)"
echo "wrk: 1 thread, ${DUR}s per cell, $REPS rounds; $(wrk -v 2>&1 | head -n 1 | awk '{print $1, $2}')"
echo

# target_start NAME UPORT: starts NAME against the upstream on UPORT and sets
# URL[NAME], PID[NAME] (the process whose CPU and memory are measured; for
# direct, the upstream itself) and HDR[NAME] (request headers)
declare -A URL PID HDR
target_start() {
  case "$1" in
    direct) URL[direct]="http://$HOST:$2/acct/bench/ok/v1/chat/completions" HDR[direct]=""
            PID[direct]=${3:-} ;;
    switchyard) gateway_start "$2"
                URL[switchyard]="http://$HOST:$SG_PORT/v1/chat/completions" PID[switchyard]=$SG_PID
                HDR[switchyard]=$SG_HEADERS ;;
    nginx) nginx_start "$2"
           URL[nginx]="http://$HOST:$NG_PORT/v1/chat/completions" PID[nginx]=$NG_PID HDR[nginx]="" ;;
    portkey) portkey_start "$2"
             URL[portkey]="http://$HOST:$PK_PORT/v1/chat/completions" PID[portkey]=$PK_PID
             HDR[portkey]=$PK_HEADERS ;;
  esac
}
targets_stop() {
  local t
  for t in "${PEERS[@]}"; do proxy_stop "${PID[$t]}"; done
}

# sanity: each target answers a plain and a streamed request as expected
check_target() { # name
  local args=() line out body pat
  while IFS= read -r line; do [ -n "$line" ] && args+=(-H "$line"); done <<<"${HDR[$1]}"
  for body in "$BODY_PLAIN" "$BODY_STREAM"; do
    pat='"chat.completion"'; [ "$body" = "$BODY_STREAM" ] && pat='data: \[DONE\]'
    out=$(curl -sS -N -i -X POST "${URL[$1]}" "${args[@]}" -H 'Content-Type: application/json' -d "$body" 2>&1) || true
    grep -q "$pat" <<<"$out" || { log "$1: unexpected answer:"; printf '%s\n' "$out" | head -n 20 >&2; exit 1; }
  done
}

# one wrk cell; appends a LOAD line to RESULTS when record=1
run_wrk() { # mode clients target seconds record
  local body=$BODY_PLAIN out line b0 b1 p0 p1 u0 u1 t0 t1 wcpu other pid=${PID[$3]}
  [ "$1" = stream ] && body=$BODY_STREAM
  [ "$3" = direct ] && pid=""
  b0=$(busy_ticks); p0=$(proc_ticks ${pid:+"$pid"}); u0=$(proc_ticks "$UPID"); t0=$(date +%s.%N)
  out=$( { TIMEFORMAT='WRKCPU %3U %3S'; time BENCH_BODY="$body" BENCH_HEADERS="${HDR[$3]}" \
            wrk -t1 -c"$2" -d"$4"s --timeout 10s -s "$ROOT/bench/post.lua" "${URL[$3]}" 2>&1; } 2>&1) || true
  b1=$(busy_ticks); p1=$(proc_ticks ${pid:+"$pid"}); u1=$(proc_ticks "$UPID"); t1=$(date +%s.%N)
  printf '== %s %s %s\n%s\n' "$1" "$2" "$3" "$out" >>"$WORK/wrk-raw.txt"
  [ "$5" = 1 ] || return 0
  wcpu=$(awk '/^WRKCPU/ {print $2 + $3}' <<<"$out")
  # cores busy with anything but proxy, upstream and wrk: noise from elsewhere
  other=$(awk -v b="$((b1 - b0))" -v p="$((p1 - p0 + u1 - u0))" -v w="${wcpu:-0}" -v hz="$HZ" -v t0="$t0" -v t1="$t1" \
            'BEGIN {o = ((b - p) / hz - w) / (t1 - t0); printf "%.2f", o < 0 ? 0 : o}')
  line=$(grep '^RESULT' <<<"$out" || echo "RESULT requests=0 duration_us=1 rps=0 p50_us=0 p99_us=0 errors=-1 non2xx=-1 timeouts=0")
  echo "LOAD mode=$1 clients=$2 target=$3 ${line#RESULT } proxy_cpu_s=$(awk -v t="$((p1 - p0))" -v hz="$HZ" 'BEGIN {print t / hz}') upstream_cpu_s=$(awk -v t="$((u1 - u0))" -v hz="$HZ" 'BEGIN {print t / hz}') other_cpu=$other" >>"$RESULTS"
}

# ---------- 1. load ----------
for t in "${TARGETS[@]}"; do target_start "$t" "$UPORT" "$UPID"; check_target "$t"; done
for mode in plain stream; do
  for t in "${TARGETS[@]}"; do # warm-up: connection pools, allocator, Portkey's JIT
    log "$mode: warm-up $t"
    run_wrk "$mode" 64 "$t" 2 0
  done
  for ((r = 1; r <= REPS; r++)); do
    for c in 1 64; do
      for t in "${TARGETS[@]}"; do
        log "$mode, round $r/$REPS, $c clients: $t"
        run_wrk "$mode" "$c" "$t" "$DUR" 1
      done
    done
  done
done

# ---------- 2. system calls per request ----------
for mode in plain stream; do
  body=$BODY_PLAIN; [ "$mode" = stream ] && body=$BODY_STREAM
  for t in "${PEERS[@]}"; do
    log "$mode: system calls of $t (strace -c -f, 64 clients)"
    strace -c -f -p "${PID[$t]}" -o "$WORK/strace.$mode.$t" 2>/dev/null &
    spid=$!
    sleep 0.5 # attached to every thread
    out=$(BENCH_BODY="$body" BENCH_HEADERS="${HDR[$t]}" \
            wrk -t1 -c64 -d3s --timeout 10s -s "$ROOT/bench/post.lua" "${URL[$t]}" 2>&1) || true
    kill -INT "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    req=$(sed -n 's/^RESULT requests=\([0-9]*\).*/\1/p' <<<"$out")
    # strace -c: "% time seconds usecs/call calls [errors] syscall"
    awk -v mode="$mode" -v t="$t" -v req="${req:-0}" '
      $NF == "total" {total = $4}
      $NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" {c[$NF] = $4}
      END {
        each = ""
        for (k in c) each = each (each == "" ? "" : ",") k ":" c[k]
        printf "SYSCALLS mode=%s target=%s requests=%d calls=%d each=%s\n", mode, t, req, total, each
      }' "$WORK/strace.$mode.$t" >>"$RESULTS"
  done
done
targets_stop

# ---------- 3. time to first byte behind a slow upstream ----------
fu_start --first-byte-ms "$FIRST_BYTE_MS"
SLOW_PID=$FU_PID SLOW_PORT=$FU_PORT
for t in "${TARGETS[@]}"; do
  target_start "$t" "$SLOW_PORT" "$SLOW_PID"
  log "time to first byte ($FIRST_BYTE_MS ms upstream): warm-up $t"
  python3 "$ROOT/bench/peers_client.py" ttfb --url "${URL[$t]}" --headers "${HDR[$t]}" --body "$BODY_STREAM" \
    --clients 64 --seconds 1 >/dev/null 2>&1 || true
done
for ((r = 1; r <= REPS; r++)); do
  for c in 1 64; do
    secs=3; [ "$c" = 1 ] && secs=2
    for t in "${TARGETS[@]}"; do
      log "time to first byte, round $r/$REPS, $c clients: $t"
      line=$(python3 "$ROOT/bench/peers_client.py" ttfb --url "${URL[$t]}" --headers "${HDR[$t]}" \
               --body "$BODY_STREAM" --clients "$c" --seconds "$secs" 2>>"$WORK/ttfb.err" | grep '^TTFB' || echo "TTFB n=0")
      echo "TTFB clients=$c target=$t ${line#TTFB }" >>"$RESULTS"
    done
  done
done
targets_stop
proxy_stop "$SLOW_PID"

# ---------- 4. memory with streams held open ----------
fu_start --hold-ms 120000 --gap-ms 1000
HOLD_PORT=$FU_PORT HOLD_PID=$FU_PID
for t in "${PEERS[@]}"; do
  log "$NSTREAMS streams held open through a fresh $t"
  target_start "$t" "$HOLD_PORT"
  line=$(python3 "$ROOT/bench/peers_client.py" hold --url "${URL[$t]}" --headers "${HDR[$t]}" --body "$BODY_STREAM" \
           -n "$NSTREAMS" --pid "${PID[$t]}" --timeout 60 2>>"$WORK/hold.err" | grep '^HOLD' || echo "HOLD n=$NSTREAMS open=0")
  echo "HOLD target=$t ${line#HOLD }" >>"$RESULTS"
  proxy_stop "${PID[$t]}"
done
proxy_stop "$HOLD_PID"

# ---------- 5. instructions per request ----------
if [ "${BENCH_INSTRUCTIONS:-1}" = 1 ]; then
  log "instructions per request (bench/instructions.sh)"
  itargets=""
  for t in "${PEERS[@]}"; do
    case "$t" in switchyard) itargets+=" gateway" ;; *) itargets+=" $t" ;; esac
  done
  BENCH_TARGETS="$itargets" "$ROOT/bench/instructions.sh" >"$WORK/instructions.txt" 2>>"$WORK/instructions.err" ||
    log "bench/instructions.sh failed (see BENCH_KEEP=1 $WORK/instructions.err)"
  awk '$1 ~ /^(gateway|nginx|portkey)$/ && $2 ~ /^[0-9]+$/ {
         printf "INSTR target=%s plain=%s stream=%s\n", ($1 == "gateway" ? "switchyard" : $1), $2, $3 }' \
    "$WORK/instructions.txt" >>"$RESULTS"
fi

# ---------- report ----------
python3 "$ROOT/bench/peers_report.py" "$RESULTS" "$NSTREAMS" "$FIRST_BYTE_MS" "${PEERS[@]}"
log "done"
