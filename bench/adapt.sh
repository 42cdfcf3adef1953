#!/usr/bin/env bash
# bench/adapt.sh: instructions per call of adapting a Codex-shaped Responses
# request to the ChatGPT backend's rules (src/dialect/adapt.c; bodies and
# cases in bench/adapt_bench.c: ~4 KiB and ~512 KiB, no instructions, a
# leading developer message, items with msg_/rs_/fc_ ids, encrypted_content
# blobs), counted by valgrind's callgrind inside bench_case only
# (--toggle-collect), so set-up is left out:
#
#   new           adapt_body on the raw bytes (what an attempt pays now)
#   old           json_parse + the tree-based adapt of before + json_free
#   parse_write   json_parse + json_write + json_free (a tree's floor)
#   validate      json_scan_value alone (the new walk's floor)
#
#   bench/adapt.sh            (BENCH_BUILD_DIR: the Release build to use or
#                              make, default build-bench in the tree)
# Counts repeat to well under 1 %; prints figures only, asserts nothing.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench}"
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
if [ "$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)" != Release ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSY_WERROR=OFF >/dev/null
fi
cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)" --target adapt_bench >/dev/null
BIN="$BUILD/bench/adapt_bench"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

"$BIN" | head -n 1
per_call() { # case n
  local out="$TMP/cg.$1"
  valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect='bench_case*' "$BIN" "$1" "$2" 2>/dev/null
  local ir
  ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$out")
  echo $((ir / $2))
}
printf '%-44s %14s %14s\n' "case" "~4 KiB" "~512 KiB"
row() { # label case
  printf '%-44s %14s %14s\n' "$1" "$(per_call "small_$2" 200)" "$(per_call "big_$2" 5)"
}
row "adapt_body on the raw bytes (now)" new
row "json_parse + tree adapt + json_free (before)" old
row "json_parse + json_write + json_free" parse_write
row "json_scan_value (validation alone)" validate
