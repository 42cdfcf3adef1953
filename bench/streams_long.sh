#!/usr/bin/env bash
# bench/streams_long.sh: long-lived streams through one gateway.
#
# N streamed chat completions (default 10 000) held open at once, each
# BENCH_HOLD_MS long (default 30 000) with a token event every
# BENCH_INTERVAL_MS (default 50) from bench/fast_upstream, driven by
# bench/stream_client (C, one libevent loop). Two runs on the same upstream:
#   1. direct: stream_client -> fast_upstream (the baseline: what the load
#      generator, the upstream and loopback cost without a gateway);
#   2. gateway: stream_client -> switchyard -> fast_upstream.
# Prints per run: errors, streams open at once, token events per second,
# per-event delay (upstream write -> client read) p50/p99/p99.9/max, the
# p99 of each stream's largest gap between events, CPU µs per relayed event
# of the gateway, the upstream and the load generator over the window in
# which all streams are open, the gateway's VmRSS (when the window opens,
# right after the ramp, and when it ends, with every stream open all
# along; and its peak); then what the gateway
# adds (gateway run minus direct run). Figures only; never fails on a timing.
#
# The gateway is started with the soft descriptor limit at 1024: raising it
# (to the hard limit) and capping connections to what fits is its own job
# (src/http/conn_limit.c, src/http/server.c). Each stream costs it two descriptors (a
# client socket and an upstream socket), so N streams need a hard limit of
# at least 2 N + 64; below that the gateway refuses the excess with 503
# too_many_connections, and this script says so before it starts.
#
# Environment:
#   BENCH_STREAMS       concurrent streams        (default 10000)
#   BENCH_HOLD_MS       length of each stream     (default 30000)
#   BENCH_INTERVAL_MS   upstream token cadence    (default 50)
#   BENCH_RAMP          new streams per second    (default 2000)
#   BENCH_TIMEOUT       seconds before the load generator gives up on a stream
#                       (default: hold + ramp + 30 s; raise it for a saturated run)
#   BENCH_DIRECT=0      skip the direct run
#   BENCH_UPSTREAM=h2c  the upstream is bench/h2c_upstream.cjs (Node.js) instead of
#                       fast_upstream, and the gateway speaks to it in cleartext HTTP/2
#                       (SWITCHYARD_UPSTREAM_H2C=1): every stream on one upstream
#                       connection, so N streams need N + 64 descriptors, not 2 N + 64.
#                       The direct run (stream_client speaks HTTP/1.1) goes to the same
#                       Node.js process, which serves HTTP/1.1 on the same port: the
#                       baseline is then that upstream's HTTP/1.1 side.
#   BENCH_BUILD_DIR, BENCH_SWITCHYARD, BENCH_KEEP: as for bench/run.sh
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
N="${BENCH_STREAMS:-10000}"
HOLD="${BENCH_HOLD_MS:-30000}"
IVL="${BENCH_INTERVAL_MS:-50}"
RAMP="${BENCH_RAMP:-2000}"
TIMEOUT="${BENCH_TIMEOUT:-0}"

LOGTAG=streams
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
if ! cmake --build "$BUILD" --target stream_client >>"$BUILD/bench-build.log" 2>&1; then
  tail -n 40 "$BUILD/bench-build.log" >&2; log "build failed"; exit 1
fi
SC="$BUILD/bench/stream_client"

echo "switchyard long-lived streams  $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), kernel $(uname -r)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
echo "streams: $N held ${HOLD} ms, a token event every ${IVL} ms ($((N * 1000 / IVL)) events/s), opened at ${RAMP}/s"
hard=$(ulimit -Hn)
H2C=0; [ "${BENCH_UPSTREAM:-}" = h2c ] && H2C=1
if [ "$H2C" = 1 ]; then
  need=$((N + N / 49 + 64)); capnote=$(((hard - 64) - (hard - 64) / 50))
  echo "upstream: bench/h2c_upstream.cjs (Node.js $(node --version 2>/dev/null || echo missing)), spoken to in h2c (SWITCHYARD_UPSTREAM_H2C=1)"
  echo "descriptor hard limit: $hard (the gateway's cap with h2c: (limit - 64) less a fiftieth; $N streams need $need)"
else
  need=$((2 * N + 64)); capnote=$(((hard - 64) / 2))
  echo "descriptor hard limit: $hard (the gateway needs 2 x $N + 64 = $need)"
fi
if [ "$hard" != unlimited ] && [ "$hard" -lt "$need" ]; then
  echo "  -> below that: the gateway caps client connections at $capnote; the rest are refused (503)"
fi
echo

# BENCH_UPSTREAM=h2c: the Node.js h2c upstream replaces fast_upstream for both runs
if [ "$H2C" = 1 ]; then
  command -v node >/dev/null || { log "BENCH_UPSTREAM=h2c needs node"; exit 1; }
  node "$ROOT/bench/h2c_upstream.cjs" --host "$HOST" --port 0 >"$WORK/h2c.out" 2>"$WORK/h2c.err" &
  UPID=$!; PIDS+=("$UPID")
  for _ in $(seq 100); do grep -q '^listening on' "$WORK/h2c.out" 2>/dev/null && break; sleep 0.05; done
  UPORT=$(awk '/^listening on/ {print $3}' "$WORK/h2c.out")
  [ -n "$UPORT" ] || { log "h2c_upstream did not start"; cat "$WORK/h2c.err" >&2; exit 1; }
  "$SY" account update --db "$DB" --name bench --base-url "http://$HOST:$UPORT/acct/bench/ok/v1" >/dev/null
fi

# the gateway of lib.sh runs with this shell's raised limit; restart it at
# the default soft limit so that raising it is the gateway's own doing
kill "$GPID" 2>/dev/null || true
wait "$GPID" 2>/dev/null || true
# every stream comes from this one loopback address: no per-address cap
(ulimit -Sn 1024; SWITCHYARD_UPSTREAM_H2C=$H2C SWITCHYARD_MAX_CONNECTIONS_PER_IP=0 exec "$SY" serve --db "$DB" --listen "$HOST:$GPORT" \
  >"$WORK/gateway-long.log" 2>&1) &
GPID=$!; PIDS+=("$GPID")
wait_http "http://$HOST:$GPORT/health" 10
echo "gateway: soft descriptor limit at start 1024, in force: $(awk '/Max open files/ {print $4}' "/proc/$GPID/limits");" \
     "client connection cap: $(curl -fsS "http://$HOST:$GPORT/health" | python3 -c 'import json,sys; d=json.load(sys.stdin); c=d.get("connections",{}); print(c.get("cap","?"))')"
echo

run() { # label port path key pid2
  local label=$1 out
  log "$label: $N streams"
  out=$("$SC" --host "$HOST" --port "$2" --path "$3" --key "$4" -n "$N" --hold-ms "$HOLD" --interval-ms "$IVL" \
          --ramp-per-s "$RAMP" --timeout "$TIMEOUT" --pid "$5" --pid2 "${6:-0}" 2>"$WORK/$label.err" | grep '^STREAMCLIENT' || true)
  [ -s "$WORK/$label.err" ] && sed "s/^/  [$label] /" "$WORK/$label.err" >&2
  echo "$label $out" >>"$WORK/results.txt"
}

: >"$WORK/results.txt"
if [ "${BENCH_DIRECT:-1}" != 0 ]; then
  run direct "$UPORT" /acct/bench/ok/v1/chat/completions none "$UPID"
  sleep 2 # let the upstream's sockets go
fi
# the gateway's connections to the upstream, sampled every second while the run lasts
upconns() { ss -Htn state established "( dport = :$UPORT )" 2>/dev/null | wc -l; }
( max=0; while :; do c=$(upconns); [ "$c" -gt "$max" ] && max=$c && echo "$max" >"$WORK/upconns.max"; sleep 1; done ) &
SAMPLER=$!; PIDS+=("$SAMPLER")
run gateway "$GPORT" /v1/chat/completions "$KEY" "$GPID" "$UPID"
kill "$SAMPLER" 2>/dev/null || true
echo "gateway -> upstream connections (ss, sampled each second): at most $(cat "$WORK/upconns.max" 2>/dev/null || echo 0) at once" \
  "over $N streams$([ "$H2C" = 1 ] && echo ", h2c: $(curl -fsS "http://$HOST:$UPORT/_stats" 2>/dev/null)")" >>"$WORK/upconns.txt"
sleep 2 # the gateway's 100 ms sweep counts the closed connections out
HEALTH=$(curl -fsS "http://$HOST:$GPORT/health" || echo '{}')
STATUS=$(grep -E '^Vm(RSS|HWM)' "/proc/$GPID/status" | tr -s ' \t' ' ' | tr '\n' ' ')

cat "$WORK/upconns.txt"
python3 - "$WORK/results.txt" "$IVL" "$HEALTH" "$STATUS" <<'EOF'
import json, sys
runs = {}
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) < 2:
        continue
    runs[parts[0]] = {k: v for k, _, v in (p.partition("=") for p in parts[2:])}
ivl = float(sys.argv[2])
f = lambda r, k: float(r.get(k, "nan"))
for label in ("direct", "gateway"):
    r = runs.get(label)
    if not r:
        continue
    proc = "upstream" if label == "direct" else "gateway"
    print(f"{label}: {r['ok']}/{r['n']} streams ended with [DONE], failed {r['failed']} "
          f"(connect {r['err_connect']}, status {r['err_status']}, truncated {r['err_truncated']}, other {r['err_other']}); "
          f"all {r['open_at_once']} open after {r['open_s']} s")
    print(f"  window with every stream open: {r['window_s']} s, {r['window_events']} token events, {r['events_per_s']} events/s;"
          f" other work on the machine meanwhile: {r.get('other_cores', '?')} cores")
    print(f"  delay per event (upstream write -> client read), ms: p50 {r['delay_p50_ms']}  p99 {r['delay_p99_ms']}"
          f"  p99.9 {r['delay_p999_ms']}  max {r['delay_max_ms']}")
    print(f"  largest gap per stream, ms: p50 {r['gap_p50_ms']}  p99 {r['gap_p99_ms']}  max {r['gap_max_ms']}"
          f"   (upstream's own, from its stamps: p99 {r['send_gap_p99_ms']}  max {r['send_gap_max_ms']})")
    print(f"  largest stretch of a gap per stream (gap read - gap between the stamps), ms: p50 {r['gap_added_p50_ms']}"
          f"  p99 {r['gap_added_p99_ms']}  max {r['gap_added_max_ms']}")
    print(f"  CPU per relayed event, us: {proc} {r['pid_us_per_event']}"
          + (f"  upstream {r['pid2_us_per_event']}" if label == "gateway" else "")
          + f"  load generator {r['self_us_per_event']}"
          f"   (CPU s in the window: {proc} {r['pid_cpu_s']}"
          + (f", upstream {r['pid2_cpu_s']}" if label == "gateway" else "") + f", load generator {r['self_cpu_s']})")
    if label == "gateway":
        print(f"  gateway VmRSS: {int(r['rss_open_kib'])/1024:.1f} MiB with all open (right after the ramp),"
              f" {int(r.get('rss_end_kib', 0))/1024:.1f} MiB at the window's end (all open all along),"
              f" peak sampled {int(r['rss_peak_kib'])/1024:.1f} MiB;"
              f" after the run: {sys.argv[4]}")
d, g = runs.get("direct"), runs.get("gateway")
if d and g:
    print("what the gateway adds (gateway run - direct run):")
    for k, name in (("delay_p50_ms", "delay p50"), ("delay_p99_ms", "delay p99"), ("delay_p999_ms", "delay p99.9"),
                    ("gap_p99_ms", "largest gap per stream, p99"),
                    ("gap_added_p99_ms", "largest stretch of a gap, p99")):
        print(f"  {name:30s} {f(g, k) - f(d, k):+8.2f} ms")
if g:
    print(f"largest gap added by the gateway, p99 over streams: {f(g, 'gap_p99_ms') - ivl:+.2f} ms over the {ivl:.0f} ms cadence"
          f" ({f(g, 'gap_p99_ms') - f(g, 'send_gap_p99_ms'):+.2f} ms over the upstream's own p99 gap)")
try:
    c = json.loads(sys.argv[3]).get("connections", {})
    print(f"gateway /health connections after the run: {json.dumps(c)}")
except ValueError:
    pass
EOF
