#!/usr/bin/env bash
# bench/soak.sh: 30 minutes (SOAK_MINUTES) of mixed traffic with faults
# injected (429 storms, streams cut after output, stalls, a SIGHUP every
# 10 s, a login refreshed every minute, the admin API polled) through one
# gateway on the mock upstream; prints RSS, descriptors, database and log
# sizes at the start, every SOAK_SAMPLE_S seconds and at the end, and the
# growth between. Figures only (bench/soak.py says what it runs). Not in the
# test suite.
#
#   bench/soak.sh                       # 30 minutes
#   SOAK_MINUTES=2 SOAK_CLIENTS=4 bench/soak.sh
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build}"
if [ ! -x "$BUILD/switchyard" ] || [ ! -x "$BUILD/tests/mock_upstream" ]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" -j"$(nproc)" --target switchyard mock_upstream >/dev/null
fi
ulimit -n 65536 2>/dev/null || true
exec python3 "$ROOT/bench/soak.py" "$BUILD"
