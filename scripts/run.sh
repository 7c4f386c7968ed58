#!/usr/bin/env bash
# Sets up, builds and runs the main job: decentralized training on 4 in-process shards of bundled
# Pubmed; ends with the test accuracy and the bytes per epoch against the centralized pipeline.
# Usage (as root on a fresh Debian 12 machine): scripts/run.sh [extra degnn train options]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
DEGNN_BUILD_DIR=${DEGNN_BUILD_DIR:-build} scripts/build.sh >/dev/null
exec "${DEGNN_BUILD_DIR:-build}/runtime/degnn" train --config-file=configs/pubmed_decentralized.conf "$@"
