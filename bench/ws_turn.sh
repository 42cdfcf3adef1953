#!/usr/bin/env bash
# bench/ws_turn.sh: the Responses turn over HTTP + SSE and over the
# WebSocket transport (src/http/ws.c, docs/codex.md "WebSocket transport").
# The same streamed turn (fast_upstream's canned /responses stream: created,
# 8 deltas, completed) N times, one after another on one connection:
# directly against the upstream, through the gateway over HTTP + SSE, and
# through the gateway over one WebSocket. Prints per path the time to the
# first and to the last event (p50/p99), the gateway's added latency
# (path − direct), its CPU µs per turn (utime+stime of the process, all
# threads; and the stime part: the kernel's), and the ratio WebSocket/HTTP; then, unless BENCH_INSTRUCTIONS=0,
# user-space instructions per turn under callgrind for both (as
# bench/instructions.sh does: (I(N2) − I(N1)) / (N2 − N1), fresh processes).
# A WebSocket turn is served as a POST the gateway makes to its own
# listener, so both sides of that loopback request count in its figures.
#
#   bench/ws_turn.sh                    # about 15 seconds
#   BENCH_TURNS=10000 BENCH_ROUNDS=5 BENCH_INSTRUCTIONS=0 bench/ws_turn.sh
#
# Figures only, nothing asserted. 127.0.0.1 only; kills what it started.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TURNS="${BENCH_TURNS:-3000}"
ROUNDS="${BENCH_ROUNDS:-3}"
INSTR="${BENCH_INSTRUCTIONS:-1}"
N1="${BENCH_INSTR_N1:-100}"
N2="${BENCH_INSTR_N2:-500}"
LOGTAG=ws_turn
[ "$INSTR" = 1 ] && BENCH_EXTRA_PKGS="valgrind:valgrind ${BENCH_EXTRA_PKGS:-}"
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"   # builds, starts fast_upstream ($UPORT) and a gateway ($GPORT, $GPID, $KEY)
CLIENT="$ROOT/bench/ws_turn_client.py"
DPATH="/acct/bench/ok/v1/responses"

# rounds, the three paths taking turns inside each round so that a
# disturbance of the shared machine hits all of them
: >"$WORK/results"
for ((r = 1; r <= ROUNDS; r++)); do
  log "round $r/$ROUNDS: $TURNS turns per path"
  {
    python3 "$CLIENT" run direct "$UPORT" "$DPATH" "" "$TURNS"
    python3 "$CLIENT" run http "$GPORT" /v1/responses "$KEY" "$TURNS" "$GPID"
    python3 "$CLIENT" run ws "$GPORT" /v1/responses "$KEY" "$TURNS" "$GPID"
  } >>"$WORK/results"
done

# instructions per turn: the gateway under callgrind, N1 then N2 turns, fresh each time
if [ "$INSTR" = 1 ]; then
  total_ir() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ && !n++ {gsub(",", "", $1); print $1}'; }
  instr() { # mode n -> instructions
    local mode=$1 n=$2 port db="$WORK/cg-$1-$2.db" out="$WORK/cg.$1.$2" key pid i
    port=$(free_port)
    "$SY" account add --db "$db" --name bench --base-url "$BASE" --token bench-upstream-token >/dev/null
    key=$("$SY" key add --db "$db" --name bench | tail -n 1)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$SY" serve --db "$db" --listen "$HOST:$port" \
      >"$WORK/vg.log" 2>&1 &
    pid=$!
    for ((i = 0; i < 2400; i++)); do curl -fsS -o /dev/null "http://$HOST:$port/health" 2>/dev/null && break; sleep 0.05; done
    python3 "$CLIENT" drive "$mode" "$port" /v1/responses "$key" "$n" || { log "$mode: a turn failed"; kill "$pid"; exit 1; }
    kill -TERM "$pid"
    wait "$pid" 2>/dev/null || true
    total_ir "$out"
  }
  for mode in http ws; do
    log "callgrind, $mode: $N1 and $N2 turns"
    a=$(instr "$mode" "$N1")
    b=$(instr "$mode" "$N2")
    echo "INSTR $mode $(((b - a) / (N2 - N1)))" >>"$WORK/results"
  done
fi

python3 - "$WORK/results" "$TURNS" "$ROUNDS" <<'EOF'
import statistics, sys
rows, instr = {}, {}
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "RESULT":
        rows.setdefault(f[1], []).append([float(x) for x in f[3:9]])
    elif f[0] == "INSTR":
        instr[f[1]] = int(f[2])
med = {m: [statistics.median(r[i] for r in v) for i in range(6)] for m, v in rows.items()}
print(f"Responses turn, {sys.argv[2]} turns per path on one connection, median of {sys.argv[3]} rounds (µs)")
print(f"{'path':<8} {'first p50':>10} {'first p99':>10} {'last p50':>10} {'last p99':>10} {'CPU/turn':>10} {'of it sys':>10}")
for m in ("direct", "http", "ws"):
    v = med[m]
    cpu = ("-", "-") if m == "direct" else (f"{v[4]:.1f}", f"{v[5]:.1f}")
    print(f"{m:<8} {v[0]:>10.1f} {v[1]:>10.1f} {v[2]:>10.1f} {v[3]:>10.1f} {cpu[0]:>10} {cpu[1]:>10}")
d = med["direct"]
added = {m: [med[m][i] - d[i] for i in range(4)] for m in ("http", "ws")}
print("added by the gateway (path − direct, µs)")
for m in ("http", "ws"):
    a = added[m]
    print(f"{m:<8} {a[0]:>10.1f} {a[1]:>10.1f} {a[2]:>10.1f} {a[3]:>10.1f} {med[m][4]:>10.1f} {med[m][5]:>10.1f}")
ratio = lambda x, y: f"{x / y:.2f}" if y > 0 else "-"
h, w = added["http"], added["ws"]
print(f"{'ws/http':<8} {ratio(w[0], h[0]):>10} {ratio(w[1], h[1]):>10} {ratio(w[2], h[2]):>10} "
      f"{ratio(w[3], h[3]):>10} {ratio(med['ws'][4], med['http'][4]):>10} {ratio(med['ws'][5], med['http'][5]):>10}")
if instr:
    print("user-space instructions per turn (callgrind, the gateway, all threads)")
    for m in ("http", "ws"):
        print(f"{m:<8} {instr[m]:>12}")
    print(f"{'ws/http':<8} {ratio(instr['ws'], instr['http']):>12}")
EOF
log "done"
