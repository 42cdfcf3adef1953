#!/usr/bin/env bash
# bench/blobs.sh: instructions per call of the account-bound blob module
# (src/upstream/blobs.c) on a Codex-sized request body (bench/blobs_bench.c:
# 200 input items, 40 reasoning items with 2.5 KB of encrypted_content,
# ~320 KB), counted by valgrind's callgrind inside bench_case only
# (--toggle-collect), so set-up is left out:
#
#   (a) plain_scan               a body of the same size without blobs: the memmem only
#   (b) codex_scan               blobs_scan of the Codex-sized body (keys included)
#   (c) codex_scan_keys_rewrite  scan + blobs_rewrite dropping the 40 reasoning items
#   and, to compare, the house parser on the same body: json_scan_value
#   (validation, no tree) and json_parse (a tree).
#
#   bench/blobs.sh            (BENCH_BUILD_DIR: the Release build to use or
#                              make, default build-bench in the tree)
# Counts repeat to well under 1 %; prints figures only, asserts nothing.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench}"
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
if [ "$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)" != Release ]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSY_WERROR=OFF >/dev/null
fi
cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)" --target blobs_bench >/dev/null
BIN="$BUILD/bench/blobs_bench"
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
printf '%-48s %14s\n' "case" "instructions"
printf '%-48s %14s\n' "(a) no \"encrypted_content\": blobs_scan (memmem)" "$(per_call plain_scan 200)"
printf '%-48s %14s\n' "(a') the same body: blobs_quick" "$(per_call plain_quick 200)"
printf '%-48s %14s\n' "(q) Codex-sized body: blobs_quick (every request)" "$(per_call codex_quick 50)"
printf '%-48s %14s\n' "(b) Codex-sized body: blobs_scan" "$(per_call codex_scan 20)"
printf '%-48s %14s\n' "(c) blobs_scan + blobs_rewrite dropping 40" "$(per_call codex_scan_keys_rewrite 20)"
printf '%-48s %14s\n' "    json_scan_value of the same body" "$(per_call codex_validate 20)"
printf '%-48s %14s\n' "    json_parse + json_free of the same body" "$(per_call codex_json_parse 20)"
