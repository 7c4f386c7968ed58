#!/usr/bin/env bash
# Configures and builds DEGNN (Release, ccache when present) into build/ (or $DEGNN_BUILD_DIR).
# Usage: scripts/build.sh [extra cmake -D options]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${DEGNN_BUILD_DIR:-build}
jobs=${DEGNN_JOBS:-$(nproc)}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j"$jobs"
