#!/usr/bin/env bash
# Sets up, builds and runs DEGNN's main job on bundled Pubmed; ends with the test accuracy.
# Usage (as root on a fresh Debian 12 machine): scripts/run.sh [extra degnn train options]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
DEGNN_BUILD_DIR=${DEGNN_BUILD_DIR:-build} scripts/build.sh >/dev/null
exec "${DEGNN_BUILD_DIR:-build}/runtime/degnn" train --config-file=configs/pubmed_sage.conf "$@"
