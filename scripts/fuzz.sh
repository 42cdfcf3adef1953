#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang-14, ASan + UBSan with
# float-cast-overflow) in build-fuzz and runs each one for SECONDS (default
# 60), all from the committed seeds plus what earlier runs found (kept in
# build-fuzz/tests/fuzz/corpus). A crash fails the run; its input is in
# build-fuzz/tests/fuzz/artifacts. Usage: scripts/fuzz.sh [SECONDS]
# (The seeds alone are replayed by every ordinary build's ctest.)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
jobs=$(nproc 2>/dev/null || echo 2)
# -Werror as the gcc builds: the tree builds warning-free under clang too
CC=clang-14 cmake -S . -B build-fuzz -DSY_FUZZ=ON -DSY_WERROR=ON -DSY_FUZZ_SECONDS="$secs" >/dev/null
cmake --build build-fuzz -j "$jobs" --target fuzz
cd build-fuzz && ctest -L fuzz --output-on-failure -j "$jobs"
