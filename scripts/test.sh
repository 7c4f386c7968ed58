#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest), then builds the fuzz harnesses and runs each for
# 5 s (scripts/fuzz.sh; DEGNN_FUZZ_SECONDS=0 skips them). Ends non-zero when a test fails or a
# fuzzer finds a crash or sanitizer report.
# Usage (as root on a fresh Debian 12 machine): scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir "${DEGNN_BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" --timeout 900
fuzz_seconds=${DEGNN_FUZZ_SECONDS:-5}
if [ "$fuzz_seconds" != 0 ]; then scripts/fuzz.sh "$fuzz_seconds"; fi
