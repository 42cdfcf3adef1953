#!/usr/bin/env bash
# Builds switchyard in each build type people type (Release, Debug,
# RelWithDebInfo, MinSizeRel) with gcc and with clang, warnings as errors,
# each in build-types/<compiler>-<type>. Optimisation levels find different
# warnings (gcc's -O3 sees a maybe-uninitialized that -O2 does not), so a
# tree that builds clean in one type may not in another.
#
# A user's own build does not stop on a warning (SY_WERROR is OFF unless
# asked for): a newer compiler's new warning must not keep anyone from
# building. CI (scripts/test.sh) turns it on, here and in its other builds.
#
# Usage: scripts/build-types.sh [--all] [TYPE...]
#   default: the gateway (the switchyard target: every file of src/) per type
#   and compiler; the suite's other builds already compile the tests and
#   benches under gcc (release, sanitizer) and the fuzz targets under clang
#   --all: every target (tests, benches, tools) as `cmake --build` builds them
set -uo pipefail
cd "$(dirname "$0")/.."
target=(--target switchyard)
types=()
for a in "$@"; do
  case $a in
    --all) target=() ;;
    Release|Debug|RelWithDebInfo|MinSizeRel) types+=("$a") ;;
    *) echo "usage: $0 [--all] [Release|Debug|RelWithDebInfo|MinSizeRel ...]" >&2; exit 2 ;;
  esac
done
[ ${#types[@]} -gt 0 ] || types=(Release Debug RelWithDebInfo MinSizeRel)
jobs=$(nproc 2>/dev/null || echo 2)
clang=$(command -v clang-14 || command -v clang || true)
compilers=(gcc)
[ -n "$clang" ] && compilers+=("$clang") || echo "build-types: no clang found; gcc only"
built=0
failures=()
for cc in "${compilers[@]}"; do
  name=$(basename "$cc")
  for type in "${types[@]}"; do
    dir=build-types/$name-$type
    echo "-- $name $type ($dir)"
    if cmake -S . -B "$dir" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE="$type" -DSY_WERROR=ON >/dev/null &&
       cmake --build "$dir" -j "$jobs" "${target[@]}" >"$dir.log" 2>&1; then
      built=$((built + 1))
    else
      grep -E "error|warning" "$dir.log" 2>/dev/null | head -20
      failures+=("$name $type")
    fi
  done
done
if [ ${#failures[@]} -gt 0 ]; then
  echo "build-types: FAILED: $(IFS=,; echo "${failures[*]}") (of $((built + ${#failures[@]})))"
  exit 1
fi
echo "build-types: $built builds clean (${types[*]}; ${compilers[*]##*/})"
