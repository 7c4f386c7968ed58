#!/usr/bin/env bash
# The bounded halo cache's curve (--halo-cache-mb): for each cache size, 4 node processes on this
# machine (degnn launch --local 4) train the same steps on a partition set, and the run's bytes
# per step, step time, set-up and every node's peak RSS are printed as a table row and a JSON line.
# Usage: [DEGNN_SIZES="all 256 64 0"] [DEGNN_PIPELINES="decentralized centralized"]
#   [DEGNN_LAYERS=3] [DEGNN_FANOUTS=10,10,10] [DEGNN_STEPS=20] [DEGNN_BATCH=1024]
#   scripts/bench_halo_cache.sh PARTS
# PARTS: a 4-part set (degnn partition --parts 4 --out PARTS). A size of "all" is the pipeline's
# default: decentralized every halo row, centralized none.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] || { echo "usage: scripts/bench_halo_cache.sh PARTS" >&2; exit 2; }
PARTS=$1
BIN=${DEGNN_BIN:-build/runtime/degnn}
read -r -a SIZES <<<"${DEGNN_SIZES:-all 256 64 16 0}"
read -r -a PIPELINES <<<"${DEGNN_PIPELINES:-decentralized centralized}"
LAYERS=${DEGNN_LAYERS:-3}
FANOUTS=${DEGNN_FANOUTS:-10,10,10}
STEPS=${DEGNN_STEPS:-20}
BATCH=${DEGNN_BATCH:-1024}
EXTRA=${DEGNN_EXTRA:-}
OUT=${DEGNN_BENCH_OUT:-/tmp/degnn-halo-cache}
mkdir -p "$OUT"
[ -x "$BIN" ] || { echo "bench_halo_cache: $BIN not built (scripts/build.sh)" >&2; exit 1; }

printf '%-14s %6s %8s %12s %12s %10s %9s %12s %22s\n' pipeline cache_mb loss MB_per_step \
  pull_MB_step epoch_s setup_s setup_MB "peak RSS MiB (max/sum)"
for pipeline in "${PIPELINES[@]}"; do
  for size in "${SIZES[@]}"; do
    log=$OUT/$pipeline-$size.log
    cache=()
    [ "$size" = all ] || cache=(--halo-cache-mb "$size")
    # shellcheck disable=SC2086
    "$BIN" launch --local 4 --partitions "$PARTS" --pipeline "$pipeline" --layers "$LAYERS" \
      --fanouts "$FANOUTS" --hidden 128 --batch-size "$BATCH" --epochs 1 --max-batches "$STEPS" \
      --eval-every 0 --no-progress --timeout 1800 "${cache[@]}" $EXTRA >"$log" 2>&1 ||
      { echo "bench_halo_cache: $pipeline at $size failed, see $log" >&2; exit 1; }
    epoch=$(grep -m1 -E '^\[0\] epoch +1 ' "$log")
    loss=$(sed -E 's/.*loss ([0-9.]+).*/\1/' <<<"$epoch")
    mb=$(sed -E 's/.* ([0-9.]+) MB sent.*/\1/' <<<"$epoch")
    # The epoch's wall time (its steps, pipelined or not, and their all-reduces).
    steps_s=$(sed -E 's/.* time ([0-9.]+)s = .*/\1/' <<<"$epoch")
    setup=$(grep -m1 -E 'history set up' "$log" || true)
    setup_s=$(sed -nE 's/.* in ([0-9.]+) s .*/\1/p' <<<"$setup")
    setup_mb=$(sed -nE 's/.*\(([0-9.]+) MB\).*/\1/p' <<<"$setup")
    rss=$(grep -E 'peak RSS [0-9]+ MiB' "$log" | sed -E 's/.*peak RSS ([0-9]+) MiB.*/\1/')
    rss_max=$(sort -n <<<"$rss" | tail -1)
    rss_sum=$(paste -sd+ <<<"$rss" | bc)
    # The steps the epoch ran (fewer than DEGNN_STEPS on a small graph): node 0's step losses.
    steps=$(grep -m1 -oE '"step_losses":\[[^]]*\]' "$log" | tr -cd ',' | wc -c)
    steps=$((steps + 1))
    per_step=$(echo "scale=2; $mb / $steps" | bc)
    # The rows the halo cache saves: feature and history pulls (decentralized: embedding_get and
    # embedding_rows; centralized: feature_request and feature_response), per step. From node
    # 0's summary of the whole run: at 2 layers the decentralized set-up's feature pull is of the
    # same kinds, so the column is left out there.
    pulls=$(grep -m1 -oE '"bytes_by_kind":\{[^}]*\}' "$log" | python3 -c '
import json, sys
kinds = json.loads("{" + sys.stdin.read() + "}")["bytes_by_kind"]
names = ["embedding_get", "embedding_rows", "feature_request", "feature_response"]
print("%.2f" % (sum(kinds.get(k, 0) for k in names) / 1e6 / int(sys.argv[1])))' "$steps")
    if [ "$pipeline" = decentralized ] && [ "$LAYERS" -lt 3 ]; then pulls=null; fi
    printf '%-14s %6s %8s %12s %12s %10s %9s %12s %22s\n' "$pipeline" "$size" "$loss" \
      "$per_step" "$pulls" "$steps_s" "${setup_s:--}" "${setup_mb:--}" "$rss_max / $rss_sum"
    echo "{\"bench\":\"halo_cache\",\"pipeline\":\"$pipeline\",\"cache_mb\":\"$size\",\"loss\":$loss,\"steps\":$steps,\"mb_per_step\":$per_step,\"pull_mb_per_step\":$pulls,\"epoch_s\":$steps_s,\"setup_s\":${setup_s:-0},\"setup_mb\":${setup_mb:-0},\"rss_max_mib\":$rss_max,\"rss_sum_mib\":$rss_sum}" >>"$OUT/results.jsonl"
  done
done
echo "JSON lines: $OUT/results.jsonl; logs: $OUT/"
