#!/usr/bin/env bash
# bench/profile.sh: where the gateway spends its time under load.
#
#   bench/profile.sh [plain|stream] [clients] [seconds]     (default: plain 64 6)
#
# Same set-up as bench/run.sh (Release build, bench/fast_upstream, one
# account, temporary db, 127.0.0.1 only). While wrk drives the gateway it
#   1. counts the gateway's system calls per request (strace -c -f, a few
#      seconds; counts are exact even though strace slows the process), then
#   2. samples it with perf (perf record -g --call-graph dwarf) and prints
#      the hottest functions by self time, the gateway's own functions by
#      inclusive time, and bench/perf_summary.py's digest of the call graphs
#      (time in each system call and who issued it, allocator callers,
#      top-level activities).
# Raw data stays in the printed directory when BENCH_KEEP=1 (perf.data can be
# opened with `perf report -i`). Prints figures only.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
MODE="${1:-plain}"
CLIENTS="${2:-64}"
SECS="${3:-6}"
LOGTAG=profile
BENCH_EXTRA_PKGS="perf:linux-perf strace:strace ${BENCH_EXTRA_PKGS:-}"
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

case "$MODE" in
  plain) BODY=$BODY_PLAIN ;;
  stream) BODY=$BODY_STREAM ;;
  *) echo "usage: $0 [plain|stream] [clients] [seconds]" >&2; exit 2 ;;
esac

load() { # seconds
  BENCH_BODY="$BODY" BENCH_KEY="$KEY" wrk -t1 -c"$CLIENTS" -d"$1"s --timeout 10s \
    -s "$ROOT/bench/post.lua" "$GW" >"$WORK/wrk-$1.txt" 2>&1
}

echo "gateway profile: $MODE, $CLIENTS clients, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
log "warm-up"
load 1

# ---- 1. system calls per request ----
log "strace -c (3 s)"
load 6 & WRK=$!
sleep 1.5
timeout 3 strace -c -f -p "$GPID" -o "$WORK/strace.txt" >/dev/null 2>&1 || true
wait "$WRK" || true
echo
echo "System calls per request (gateway, all threads; normalised by sendto = one per upstream request):"
awk '$NF ~ /^[a-z_0-9]+$/ && $4 ~ /^[0-9]+$/ && $NF != "total" {c[$NF] = $4}
     END {n = c["sendto"]; if (!n) {print "  (no requests seen)"; exit}
          t = 0; for (k in c) t += c[k]
          printf "  %-14s %6.2f\n", "TOTAL", t / n
          for (k in c) if (c[k] / n >= 0.01) printf "  %-14s %6.2f\n", k, c[k] / n | "sort -k2 -nr"}' "$WORK/strace.txt"

# ---- 2. perf ----
log "perf record ($SECS s)"
load $((SECS + 2)) & WRK=$!
sleep 1
perf record -F 999 -g --call-graph dwarf,16384 -p "$GPID" -o "$WORK/perf.data" -- sleep "$SECS" \
  >"$WORK/perf-record.txt" 2>&1 || true
wait "$WRK" || true
grep '^RESULT' "$WORK/wrk-$((SECS + 2)).txt" | sed 's/^/wrk while profiling (perf slows it): /'

echo
echo "Threads (share of the gateway's samples):"
perf report -i "$WORK/perf.data" --no-children --sort pid --stdio -g none 2>/dev/null |
  grep -v '^#' | grep -v '^$' | head -n 5 | sed 's/^/  /' || true
echo
echo "Hottest functions by self time (all threads):"
perf report -i "$WORK/perf.data" --no-children --sort dso,symbol --stdio -g none 2>/dev/null |
  grep -v '^#' | grep -v '^$' | head -n 30 | sed 's/  *$//; s/^/  /' || true
echo
echo "Gateway functions by inclusive time (children included):"
perf report -i "$WORK/perf.data" --children --sort dso,symbol --stdio -g none 2>/dev/null |
  grep -v '^#' | awk '$3 == "switchyard"' | head -n 40 | sed 's/  *$//; s/^/  /' || true
echo
echo "Summary of the call graphs (bench/perf_summary.py):"
perf script -i "$WORK/perf.data" -F tid,ip,sym,dso 2>/dev/null |
  python3 "$ROOT/bench/perf_summary.py" --bin "$(basename "$SY")" || true
log "done"
