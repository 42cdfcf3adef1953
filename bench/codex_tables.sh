#!/usr/bin/env bash
# bench/codex_tables.sh: how `switchyard codex attach --offline`, `status`
# and `detach` grow with the size of config.toml. Each size N is a file of
# N tables ([t0] .. [tN-1], after `model = "gpt-5"`: the shape of
# tests/e2e/test_hostile_files.py) in a fresh Codex home and database; the
# three commands run one after another, and the file must come back byte
# for byte. A linear editor costs the same per table at every size: the
# "per table" column stays flat and each size's total grows by the same
# factor as N ("growth" against "x N"). A quadratic one (the first version
# took five minutes at 400,000 tables) doubles its per-table cost with N.
#
#   bench/codex_tables.sh [BINARY]   (default: the Release build's switchyard)
#   BENCH_TABLES="25000 50000 100000 200000 400000"   the sizes
#   BENCH_INSTRUCTIONS=0             CPU time only, no callgrind
#
# Figures per size and command: user-space instructions (callgrind, whole
# process, one run: repeatable to well under 1 %, the figure to compare two
# builds with) and CPU time (user + system, the fastest of 3 runs: a shared
# VM moves it by tens of percent). "per table" is (the size's total - the
# total for a file without tables) / N: what a table costs, start-up
# (sqlite, the journal, the key) left out; instructions, or µs of CPU.
# Several minutes with callgrind (BENCH_BUILD_DIR: the Release build to use
# or make, default build-bench in the tree), a minute without; prints
# figures only, asserts nothing.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench}"
SIZES="${BENCH_TABLES:-25000 50000 100000 200000 400000}"
INSTR="${BENCH_INSTRUCTIONS:-1}"
if [ -n "${1:-}" ]; then
  SY="$1"
else
  if [ "$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)" != Release ]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSY_WERROR=OFF >/dev/null
  fi
  cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)" --target switchyard >/dev/null
  SY="$BUILD/switchyard"
fi
if [ "$INSTR" != 0 ] && ! command -v valgrind >/dev/null; then
  echo "valgrind is needed for instruction counts (apt-get install valgrind), or BENCH_INSTRUCTIONS=0" >&2
  exit 1
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

cmd() { # dir command...: one codex command in dir's home and database
  local dir="$1"; shift
  env -i PATH="$PATH" HOME="$dir" "$SY" codex "$@" --db "$dir/sy.db" --codex-home "$dir/home" >/dev/null 2>"$dir/err"
}
cpu_ms() { # dir command...: CPU ms of one run (user + system of the child)
  local TIMEFORMAT='%U %S' t
  t=$( { time cmd "$@" || true; } 2>&1 | tail -n 1)
  awk -v t="$t" 'BEGIN { split(t, a, " "); printf "%d", (a[1] + a[2]) * 1000 + 0.5 }'
}
instr() { # dir command...: callgrind's instructions of one run
  local dir="$1"; shift
  env -i PATH="$PATH" HOME="$dir" valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" \
    "$SY" codex "$@" --db "$dir/sy.db" --codex-home "$dir/home" >/dev/null 2>&1 || true
  awk '/^(summary|totals):/ {print $2; exit}' "$dir/cg.out"
}
ATTACH=(attach --gateway http://127.0.0.1:9 --offline)

# One size: "attach status detach" figures of one kind (cpu or instr). Each
# measured command gets a fresh home and database with the original file,
# and the commands before it run unmeasured (status and detach need the
# attach); CPU time is the fastest of 3 such runs, instructions one run.
measure() { # tables kind
  local n="$1" kind="$2" dir="$TMP/n$1" out=() c rep v best
  for c in attach status detach; do
    best=""
    for rep in 1 2 3; do
      if [ "$kind" = instr ] && [ "$rep" -gt 1 ]; then break; fi
      rm -rf "$dir" && mkdir -p "$dir/home"
      awk -v n="$n" 'BEGIN { print "model = \"gpt-5\""; for (i = 0; i < n; i++) printf "[t%d]\n", i }' \
        >"$dir/home/config.toml"
      cp "$dir/home/config.toml" "$dir/orig.toml"
      local args=("$c")
      if [ "$c" = attach ]; then
        args=("${ATTACH[@]}")
      elif ! cmd "$dir" "${ATTACH[@]}"; then
        cat "$dir/err" >&2
        exit 1
      fi
      if [ "$kind" = instr ]; then v=$(instr "$dir" "${args[@]}"); else v=$(cpu_ms "$dir" "${args[@]}"); fi
      if [ -z "$best" ] || [ "$v" -lt "$best" ]; then best=$v; fi
      if [ "$c" = detach ] && ! cmp -s "$dir/orig.toml" "$dir/home/config.toml"; then
        echo "detach did not give the file of $n tables back byte for byte" >&2
        exit 1
      fi
    done
    out+=("$best")
  done
  echo "${out[*]}"
}

# The table of one kind: per size, the three commands, their total, the
# cost per table above a file without tables, and how that cost grew from
# the size before ("growth") against how N grew ("x N"): equal when linear.
report() { # kind title per-table-scale
  local kind="$1" title="$2" scale="$3" base0 prev="" prev_n="" n a s d total bytes per growth xn
  read -r a s d <<<"$(measure 0 "$kind")"
  base0=$((a + s + d))
  printf '\n%s; a file without tables: attach %s, status %s, detach %s\n' "$title" "$a" "$s" "$d"
  printf '%8s %9s %13s %13s %13s %13s %10s %7s %5s\n' tables bytes attach status detach total "per table" growth "x N"
  for n in $SIZES; do
    read -r a s d <<<"$(measure "$n" "$kind")"
    total=$((a + s + d))
    bytes=$(wc -c <"$TMP/n$n/orig.toml")
    per=$(awk -v t="$total" -v b="$base0" -v n="$n" -v k="$scale" 'BEGIN { printf "%.1f", (t - b) * k / n }')
    growth=-
    xn=-
    if [ -n "$prev" ]; then
      growth=$(awk -v t="$total" -v p="$prev" -v b="$base0" 'BEGIN { printf "%.2f", (t - b) / (p - b) }')
      xn=$(awk -v n="$n" -v p="$prev_n" 'BEGIN { printf "%.2f", n / p }')
    fi
    printf '%8s %9s %13s %13s %13s %13s %10s %7s %5s\n' "$n" "$bytes" "$a" "$s" "$d" "$total" "$per" "$growth" "$xn"
    prev=$total prev_n=$n
  done
}

echo "codex attach --offline / status / detach of a config.toml of N tables: $SY"
if [ "$INSTR" != 0 ]; then report instr "instructions (callgrind, whole process; per table: instructions)" 1; fi
report cpu "CPU ms (user + system, fastest of 3; per table: µs)" 1000
