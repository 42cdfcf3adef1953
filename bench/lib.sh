# bench/lib.sh: set-up shared by bench/run.sh, bench/profile.sh and
# bench/instructions.sh (sourced, not run). Expects ROOT and LOGTAG; sets
# BUILD (BENCH_BUILD_DIR or /tmp/switchyard-bench-build), HOST (127.0.0.1)
# and T0 (the start, for log lines); leaves behind SY, FU, FLOOR_BIN,
# WORK, PIDS, UPID, UPORT, GPID, GPORT, KEY, GW, DIRECT, BODY_PLAIN,
# BODY_STREAM and an EXIT trap that kills what it started.
#
# BENCH_SWITCHYARD=/path/to/switchyard benchmarks that binary instead of the
# one built here (e.g. a patched build), with everything else unchanged.
# BENCH_EXTRA_PKGS: Debian packages to install if their command is missing,
# as "command:package ..." pairs.

BUILD="${BENCH_BUILD_DIR:-/tmp/switchyard-bench-build}"
HOST=127.0.0.1
T0=$(date +%s)

log() { printf '[%s %3ds] %s\n' "$LOGTAG" "$(($(date +%s) - T0))" "$*" >&2; }

# ---------- tools ----------
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
"$ROOT/scripts/install-deps.sh"
for pair in wrk:wrk ${BENCH_EXTRA_PKGS:-}; do
  if ! command -v "${pair%%:*}" >/dev/null 2>&1; then
    log "installing ${pair#*:}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get install -y -qq "${pair#*:}" >/dev/null 2>&1 ||
      { $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${pair#*:}" >/dev/null; }
  fi
done

# ---------- build ----------
# a build directory configured for another checkout (a removed worktree, another clone) is started afresh
src_dir="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)" # none yet: fresh
if [ -n "$src_dir" ] && [ "$(cd "$src_dir" 2>/dev/null && pwd -P)" != "$(cd "$ROOT" && pwd -P)" ]; then
  log "$BUILD was configured for $src_dir: starting it afresh"
  rm -rf "$BUILD"
fi
if [ "$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)" != Release ]; then
  log "configuring $BUILD (Release)"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSY_WERROR=OFF >/dev/null
fi
log "building (incremental)"
targets="fast_upstream floor_proxy"; [ -z "${BENCH_SWITCHYARD:-}" ] && targets="switchyard $targets"
# shellcheck disable=SC2086
if ! cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)" --target $targets >"$BUILD/bench-build.log" 2>&1; then
  tail -n 40 "$BUILD/bench-build.log" >&2; log "build failed"; exit 1
fi
SY="${BENCH_SWITCHYARD:-$BUILD/switchyard}"
FU="$BUILD/bench/fast_upstream"
FLOOR_BIN="$BUILD/bench/floor_proxy"

# ---------- descriptors: 1000 clients = 1000 client + 1000 upstream sockets ----------
hard=$(ulimit -Hn)
want=65536
[ "$hard" != unlimited ] && [ "$hard" -lt "$want" ] && want=$hard
ulimit -n "$want" 2>/dev/null || true
if [ "$(ulimit -n)" -lt 4200 ]; then
  log "warning: ulimit -n is $(ulimit -n); 1000-client runs need about 4200 descriptors"
fi

# ---------- processes, cleanup ----------
WORK="$(mktemp -d /tmp/switchyard-bench.XXXXXX)"
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]:-}"; do
    [ -n "$pid" ] && wait "$pid" 2>/dev/null || true
  done
  if [ "${BENCH_KEEP:-0}" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# CPU accounting for the cells: clock ticks (HZ a second) of the whole
# machine, and utime+stime of the given pids (all their threads)
HZ=$(getconf CLK_TCK)
busy_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
proc_ticks() {
  local t=0 p
  for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
  echo "$t"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_http() { # url, seconds
  local i
  for ((i = 0; i < $2 * 20; i++)); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.05
  done
  log "no answer from $1"; return 1
}

"$FU" --host "$HOST" --port 0 >"$WORK/upstream.out" 2>"$WORK/upstream.err" &
UPID=$!; PIDS+=("$UPID")
for _ in $(seq 100); do grep -q '^listening on' "$WORK/upstream.out" 2>/dev/null && break; sleep 0.05; done
UPORT=$(awk '/^listening on/ {print $3}' "$WORK/upstream.out")
[ -n "$UPORT" ] || { log "fast_upstream did not start"; cat "$WORK/upstream.err" >&2; exit 1; }
BASE="http://$HOST:$UPORT/acct/bench/ok/v1"

DB="$WORK/bench.db"
"$SY" account add --db "$DB" --name bench --base-url "$BASE" --token bench-upstream-token >/dev/null
KEY=$("$SY" key add --db "$DB" --name bench | tail -n 1)
GPORT=$(free_port)
# the load comes from this one loopback address: no per-address connection cap
SWITCHYARD_MAX_CONNECTIONS_PER_IP=0 "$SY" serve --db "$DB" --listen "$HOST:$GPORT" >"$WORK/gateway.log" 2>&1 &
GPID=$!; PIDS+=("$GPID")
wait_http "http://$HOST:$GPORT/health" 10
GW="http://$HOST:$GPORT/v1/chat/completions"
DIRECT="$BASE/chat/completions"

BODY_PLAIN='{"model":"gpt-bench","messages":[{"role":"user","content":"Say hello."}]}'
BODY_STREAM='{"model":"gpt-bench","stream":true,"messages":[{"role":"user","content":"Say hello."}]}'

# ---------- sanity: both paths answer what we think ----------
check() { # url body what
  local out
  out=$(curl -fsS -N -i -X POST "$1" -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d "$2")
  grep -q "$3" <<<"$out" || { log "unexpected answer from $1:"; printf '%s\n' "$out" >&2; exit 1; }
}
check "$GW" "$BODY_PLAIN" 'x-switchyard-account: bench'
check "$GW" "$BODY_PLAIN" '"chat.completion"'
check "$GW" "$BODY_STREAM" 'data: \[DONE\]'
check "$DIRECT" "$BODY_STREAM" 'data: \[DONE\]'

