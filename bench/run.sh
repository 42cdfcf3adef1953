#!/usr/bin/env bash
# bench/run.sh: gateway overhead benchmark, one command, one run.
#
# Builds switchyard (Release) if needed, starts bench/fast_upstream and the
# gateway (one account pointing at it, temporary db) on 127.0.0.1, then:
#   1. holds 1000 streams open through the gateway at once (bench/streams.py)
#      and reads the gateway's VmRSS / VmHWM while they are open;
#   2. for plain and streamed (SSE) chat completions at 1, 64 and 1000
#      concurrent clients, runs wrk (bench/post.lua) directly against the
#      mock and through the gateway: req/s, p50, p99;
#   3. runs the same cells through bench/floor_proxy (the gateway's evhttp +
#      libcurl plumbing with none of its logic), so the figures say how much
#      of the gap to direct is the gateway's own work and how much the floor;
#   4. with BENCH_NGINX=1, the same cells through nginx (one process,
#      keep-alive upstream pool, no buffering; bench/proxies.sh, which
#      fetches nginx if missing): what a proxy that does its own HTTP reaches;
#   5. prints the table, the gateway/direct ratios and the three targets.
# Prints figures only; never fails on a timing. Stops by itself (about two
# minutes with the defaults) and kills what it started.
#
# Environment:
#   BENCH_BUILD_DIR   build directory     (default /tmp/switchyard-bench-build)
#   BENCH_DURATION    seconds per wrk run (default 7)
#   BENCH_STREAMS     concurrent streams for the RSS phase (default 1000)
#   BENCH_CLIENTS     concurrency levels  (default "1 64 1000")
#   BENCH_KEEP=1      keep the temporary directory (db, logs, raw wrk output)
#   BENCH_SWITCHYARD  gateway binary to measure instead of the one built here
#   BENCH_NGINX=1     also measure nginx as a reference proxy (bench/peers.sh compares more)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DUR="${BENCH_DURATION:-7}"
NSTREAMS="${BENCH_STREAMS:-1000}"
CLIENTS="${BENCH_CLIENTS:-1 64 1000}"

LOGTAG=bench
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

echo "switchyard benchmark  $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)," \
     "$(awk '/MemTotal/ {printf "%.0f GiB RAM", $2/1048576}' /proc/meminfo), kernel $(uname -r)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')," \
     "build: Release, $(wrk -v 2>&1 | head -n 1 | awk '{print $1, $2}'), ${DUR}s per run, 1 wrk thread"
echo

"$FLOOR_BIN" --port 0 --upstream "http://$HOST:$UPORT/acct/bench/ok" >"$WORK/floor.out" 2>&1 &
FPID=$!; PIDS+=("$FPID")
for _ in $(seq 100); do grep -q '^listening on' "$WORK/floor.out" 2>/dev/null && break; sleep 0.05; done
FLOOR="http://$HOST:$(awk '/^listening on/ {print $3}' "$WORK/floor.out")/v1/chat/completions"
check "$FLOOR" "$BODY_PLAIN" '"chat.completion"'

NGINX=""
if [ "${BENCH_NGINX:-0}" = 1 ]; then
  # shellcheck source=bench/proxies.sh
  . "$ROOT/bench/proxies.sh"
  nginx_find
  if [ -n "$NGINX_BIN" ]; then
    nginx_start "$UPORT"
    NGPID=$NG_PID
    NGINX="http://$HOST:$NG_PORT/v1/chat/completions"
    check "$NGINX" "$BODY_PLAIN" '"chat.completion"'
  fi
fi

# ---------- 1. 1000 streams open at once, gateway memory ----------
log "RSS phase: $NSTREAMS concurrent streams through the gateway"
STREAMS_LINE=$(python3 "$ROOT/bench/streams.py" --host "$HOST" --port "$GPORT" --key "$KEY" \
                 --pid "$GPID" -n "$NSTREAMS" --hold-ms 8000 --timeout 40 2>"$WORK/streams.err" | grep '^STREAMS')
echo "$STREAMS_LINE" >"$WORK/streams.txt"

# ---------- 2. throughput and latency ----------
RESULTS="$WORK/results.txt"
: >"$RESULTS"
run_wrk() { # mode clients target url body key seconds record(0/1) [proxy pid, default the gateway]
  local out line b0 b1 g0 g1 u0 u1 t0 t1 wcpu other cpu ppid=${9:-$GPID}
  b0=$(busy_ticks); g0=$(proc_ticks "$ppid"); u0=$(proc_ticks "$UPID"); t0=$(date +%s.%N)
  # bash's `time` gives wrk's own CPU; the rest of the machine's busy time
  # during the run, less gateway, mock and wrk, is "other CPU" (noise).
  out=$( { TIMEFORMAT='WRKCPU %3U %3S'; time BENCH_BODY="$5" BENCH_KEY="$6" \
            wrk -t1 -c"$2" -d"$7"s --timeout 10s -s "$ROOT/bench/post.lua" "$4" 2>&1; } 2>&1) || true
  b1=$(busy_ticks); g1=$(proc_ticks "$ppid"); u1=$(proc_ticks "$UPID"); t1=$(date +%s.%N)
  printf '== %s %s %s\n%s\n' "$1" "$2" "$3" "$out" >>"$WORK/wrk-raw.txt"
  wcpu=$(awk '/^WRKCPU/ {print $2 + $3}' <<<"$out")
  other=$(awk -v b="$((b1 - b0))" -v p="$((g1 - g0 + u1 - u0))" -v w="${wcpu:-0}" -v hz="$HZ" -v t0="$t0" -v t1="$t1" \
            'BEGIN {o = ((b - p) / hz - w) / (t1 - t0); printf "%.2f", o < 0 ? 0 : o}')
  cpu="gw_cpu_s=$(awk -v t="$((g1 - g0))" -v hz="$HZ" 'BEGIN {print t / hz}') mock_cpu_s=$(awk -v t="$((u1 - u0))" -v hz="$HZ" 'BEGIN {print t / hz}')"
  line=$(grep '^RESULT' <<<"$out" || echo "RESULT requests=0 duration_us=1 rps=0 p50_us=0 p99_us=0 errors=-1 non2xx=-1 timeouts=0")
  [ "$8" = 1 ] && echo "$1 $2 $3 $line other_cpu=$other $cpu" >>"$RESULTS"
  return 0
}
for mode in plain stream; do
  if [ "$mode" = plain ]; then body=$BODY_PLAIN; else body=$BODY_STREAM; fi
  # warm-up: connection pools, allocator, page cache
  run_wrk "$mode" 64 direct "$DIRECT" "$body" "" 1 0
  run_wrk "$mode" 64 gateway "$GW" "$body" "$KEY" 1 0
  run_wrk "$mode" 64 floor "$FLOOR" "$body" "" 1 0 "$FPID"
  [ -n "$NGINX" ] && run_wrk "$mode" 64 nginx "$NGINX" "$body" "" 1 0 "$NGPID"
  for c in $CLIENTS; do
    log "$mode, $c clients: direct"
    run_wrk "$mode" "$c" direct "$DIRECT" "$body" "" "$DUR" 1
    log "$mode, $c clients: gateway"
    run_wrk "$mode" "$c" gateway "$GW" "$body" "$KEY" "$DUR" 1
    log "$mode, $c clients: floor"
    run_wrk "$mode" "$c" floor "$FLOOR" "$body" "" "$DUR" 1 "$FPID"
    if [ -n "$NGINX" ]; then
      log "$mode, $c clients: nginx"
      run_wrk "$mode" "$c" nginx "$NGINX" "$body" "" "$DUR" 1 "$NGPID"
    fi
  done
done
FINAL_STATUS=$(grep -E '^Vm(RSS|HWM)' "/proc/$GPID/status" | tr -s ' \t' ' ' | paste -sd ' ')

# ---------- 3. report ----------
python3 - "$RESULTS" "$WORK/streams.txt" "$FINAL_STATUS" <<'EOF'
import re, sys
rows = {}
for line in open(sys.argv[1]):
    mode, c, target, _, *kv = line.split()
    rows[(mode, int(c), target)] = {k: float(v) for k, v in (x.split("=") for x in kv)}
st = dict(x.split("=") for x in open(sys.argv[2]).read().split()[1:]) if open(sys.argv[2]).read().strip() else {}

print("Throughput and latency (wrk, chat/completions; latency in ms)")
hdr = ("mode", "clients", "direct req/s", "gw req/s", "gw/direct", "direct p50", "gw p50", "direct p99",
       "gw p99", "added p50", "added p99", "errors d/gw", "other CPU d/gw")
fmt = "{:<7}{:>8}{:>14}{:>11}{:>11}{:>12}{:>9}{:>12}{:>9}{:>11}{:>11}{:>13}{:>16}"
print(fmt.format(*hdr))
ratio = {}
added99 = {}
for mode in ("plain", "stream"):
    for c in sorted({k[1] for k in rows if k[0] == mode}):
        d, g = rows.get((mode, c, "direct")), rows.get((mode, c, "gateway"))
        if not d or not g:
            continue
        r = g["rps"] / d["rps"] if d["rps"] else 0.0
        a50 = (g["p50_us"] - d["p50_us"]) / 1000
        a99 = (g["p99_us"] - d["p99_us"]) / 1000
        ratio[(mode, c)] = r
        added99[(mode, c)] = a99
        err = "%d/%d" % (d["errors"] + d["non2xx"], g["errors"] + g["non2xx"])
        print(fmt.format(mode, c, "%.0f" % d["rps"], "%.0f" % g["rps"], "%.1f%%" % (100 * r),
                         "%.3f" % (d["p50_us"] / 1000), "%.3f" % (g["p50_us"] / 1000),
                         "%.3f" % (d["p99_us"] / 1000), "%.3f" % (g["p99_us"] / 1000),
                         "%+.3f" % a50, "%+.3f" % a99, err, "%.2f/%.2f" % (d["other_cpu"], g["other_cpu"])))
print()
print("CPU per request (process CPU time during the run / requests served; less sensitive to noise)")
fmt2 = "{:<7}{:>8}{:>22}{:>22}{:>24}"
print(fmt2.format("mode", "clients", "mock us/req (direct)", "gateway us/req", "mock us/req (via gw)"))
for mode in ("plain", "stream"):
    for c in sorted({k[1] for k in rows if k[0] == mode}):
        d, g = rows.get((mode, c, "direct")), rows.get((mode, c, "gateway"))
        if not d or not g or not d["requests"] or not g["requests"]:
            continue
        print(fmt2.format(mode, c, "%.1f" % (1e6 * d["mock_cpu_s"] / d["requests"]),
                          "%.1f" % (1e6 * g["gw_cpu_s"] / g["requests"]),
                          "%.1f" % (1e6 * g["mock_cpu_s"] / g["requests"])))
print("(other CPU: cores busy with processes other than gateway, mock and wrk during the run; "
      "well above 0 means the figures are disturbed)")
print()
fmt3 = "{:<7}{:>8}{:>14}{:>13}{:>14}{:>16}{:>16}"
def proxy_table(target, lines):
    """A proxy measured beside the gateway: its req/s and CPU against direct and the gateway."""
    if not any(k[2] == target for k in rows):
        return
    for l in lines:
        print(l)
    print(fmt3.format("mode", "clients", target + " req/s", target + "/direct", "gw/direct",
                      target + " us/req", "gateway us/req"))
    for mode in ("plain", "stream"):
        for c in sorted({k[1] for k in rows if k[0] == mode}):
            d, g, x = rows.get((mode, c, "direct")), rows.get((mode, c, "gateway")), rows.get((mode, c, target))
            if not d or not g or not x or not d["rps"] or not x["requests"] or not g["requests"]:
                continue
            print(fmt3.format(mode, c, "%.0f" % x["rps"], "%.1f%%" % (100 * x["rps"] / d["rps"]),
                              "%.1f%%" % (100 * g["rps"] / d["rps"]),
                              "%.1f" % (1e6 * x["gw_cpu_s"] / x["requests"]),
                              "%.1f" % (1e6 * g["gw_cpu_s"] / g["requests"])))
    print()
proxy_table("floor", ["Floor: bench/floor_proxy, the gateway's evhttp + libcurl plumbing with none of its logic",
                      "(no auth, JSON, policy, log, trace, preflight; replies once the upstream is done)"])
proxy_table("nginx", ["Reference: nginx as one process (master_process off), keep-alive upstream pool,",
                      "proxy_buffering off, same mock"])
print("Gateway memory with %s streams open at once (%s of them open together, %s completed, %s failed, opened in %ss)"
      % (st.get("n", "?"), st.get("open_at_once", "?"), st.get("completed", "?"), st.get("failed", "?"), st.get("open_s", "?")))
kib = lambda k: int(st.get(k, 0))
print("  idle before: VmRSS %.1f MiB" % (kib("idle_rss_kib") / 1024))
print("  all open:    VmRSS %.1f MiB (peak sampled %.1f MiB), VmHWM %.1f MiB"
      % (kib("rss_kib") / 1024, kib("rss_peak_kib") / 1024, kib("hwm_kib") / 1024))
print("  after the whole run: %s" % sys.argv[3])
print()
def verdict(ok): return "MET" if ok else "MISSED"
print("Targets")
if ("plain", 1) in added99:
    worst = max(added99.get(("plain", 1), 0), added99.get(("stream", 1), 0))
    print("  added p99 < 1 ms at 1 client:        plain %+.3f ms, stream %+.3f ms -> %s"
          % (added99.get(("plain", 1), 0), added99.get(("stream", 1), 0), verdict(worst < 1.0)))
if ("plain", 64) in ratio:
    worst = min(ratio.get(("plain", 64), 0), ratio.get(("stream", 64), 0))
    print("  >= 50%% of direct req/s at 64 clients: plain %.1f%%, stream %.1f%% -> %s"
          % (100 * ratio.get(("plain", 64), 0), 100 * ratio.get(("stream", 64), 0), verdict(worst >= 0.5)))
hwm = max(kib("hwm_kib"), kib("rss_peak_kib"))
allopen = st.get("open_at_once") == st.get("n") and st.get("n") not in (None, "0")
print("  %s streams < 100 MiB RSS:           VmHWM %.1f MiB%s -> %s"
      % (st.get("n", "?"), hwm / 1024, "" if allopen else " (not all were open at once!)",
         verdict(allopen and hwm < 100 * 1024)))
EOF
log "done"
