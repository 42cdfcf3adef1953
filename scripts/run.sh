#!/usr/bin/env bash
# Builds switchyard and runs the gateway on its embedded defaults
# (./switchyard.db, the bundled policies, 127.0.0.1:8787). Extra arguments
# go to `switchyard serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build >/dev/null
cmake --build build -j "$(nproc 2>/dev/null || echo 2)"
exec ./build/switchyard serve "$@"
