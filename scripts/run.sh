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
graph=${DEGNN_MAIN_GRAPH:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/degnn/main-job}
# The graph is kept with the settings that made it: other settings (or a later partition format
# that refuses the kept files) make it again.
made_with="nodes=100000 edges=1000000 features=64 classes=8 homophily=0.5 signal=0.25 seed=1 parts=4 metis seed=1"
mkdir -p "$graph"
exec 9>"$graph/.lock"
flock 9  # two main jobs at once make the graph once
if [ ! -f "$graph/synthetic-100k-4/partitions.meta" ] ||
   [ "$(cat "$graph/made-with" 2>/dev/null)" != "$made_with" ] ||
   ! "$bin" info --data "$graph/synthetic-100k-4" >/dev/null 2>&1; then
  echo "main job: generating and partitioning its graph once, into $graph ..."
  rm -rf "$graph/synthetic-100k" "$graph/synthetic-100k-4" "$graph/synthetic-100k-4.tmp" \
    "$graph/made-with"
  # CSV (features with 6 significant digits): the graph the recorded results were measured on.
  "$bin" generate --out "$graph/synthetic-100k" --nodes 100000 --edges 1000000 --features 64 \
    --classes 8 --homophily 0.5 --signal 0.25 --seed 1 --format csv >/dev/null
  "$bin" partition --data "$graph/synthetic-100k" --parts 4 --method metis --seed 1 \
    --out "$graph/synthetic-100k-4.tmp" >/dev/null
  mv "$graph/synthetic-100k-4.tmp" "$graph/synthetic-100k-4"
  echo "$made_with" > "$graph/made-with"
fi
exec 9>&-
exec "$bin" train --config-file=configs/main_job.conf --partitions "$graph/synthetic-100k-4" "$@"
