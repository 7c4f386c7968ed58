#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest). Ends non-zero when a test fails.
# Usage (as root on a fresh Debian 12 machine): scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir "${DEGNN_BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" --timeout 900
