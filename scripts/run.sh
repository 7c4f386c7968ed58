#!/usr/bin/env bash
# Sets up, builds and runs the main job: 3-layer GraphSAGE, decentralized, on 4 in-process shards
# of a generated 100k-node graph (made and partitioned on the first run, then kept), then the
# centralized pipeline on the same partitions and seed; ends with both pipelines' bytes per epoch,
# epoch time, end-to-end traffic and test accuracy side by side (configs/main_job.conf).
# Usage (as root on a fresh Debian 12 machine): scripts/run.sh [extra degnn train options]
#   DEGNN_MAIN_GRAPH: where the graph and its partitions are kept
#   (default $XDG_CACHE_HOME/degnn/main-job, or ~/.cache/degnn/main-job).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
DEGNN_BUILD_DIR=${DEGNN_BUILD_DIR:-build} scripts/build.sh >/dev/null
bin="${DEGNN_BUILD_DIR:-build}/runtime/degnn"
graph=${DEGNN_MAIN_GRAPH:-${XDG_CACHE_HOME:-$HOME/.cache}/degnn/main-job}
if [ ! -f "$graph/synthetic-100k-4/partitions.meta" ]; then
  echo "main job: generating and partitioning its graph once, into $graph ..."
  rm -rf "$graph/synthetic-100k" "$graph/synthetic-100k-4"
  mkdir -p "$graph"
  "$bin" generate --out "$graph/synthetic-100k" --nodes 100000 --edges 1000000 --features 64 \
    --classes 8 --homophily 0.5 --signal 0.25 --seed 1 >/dev/null
  "$bin" partition --data "$graph/synthetic-100k" --parts 4 --method metis --seed 1 \
    --out "$graph/synthetic-100k-4.tmp" >/dev/null
  mv "$graph/synthetic-100k-4.tmp" "$graph/synthetic-100k-4"
fi
exec "$bin" train --config-file=configs/main_job.conf --partitions "$graph/synthetic-100k-4" "$@"
