#!/usr/bin/env bash
# Test accuracy of the decentralized pipeline (history at 8, 4 and 2 bits, and 8 bits with a
# locality-biased local expansion) against the centralized one on the same 4 METIS partitions,
# 3 layers (so history is used), seeds 1..N.
# Usage: scripts/accuracy_pipelines.sh [SEEDS] [DATASET]   (defaults: 3 pubmed)
#   DATASET pubmed: bundled Pubmed, configs/pubmed_sage.conf, 30 epochs.
#   DATASET synthetic: a 100k-node DC-SBM graph (8 classes, homophily 0.5, feature signal 0.25,
#     generated once under /tmp/degnn-bench), hidden 64, batch 1024, 20 epochs.
#   DEGNN_ACC_BIAS (default "0.5"): local-bias values to run with 8-bit history; "" for none.
#   DEGNN_ACC_BITS (default "8 4 2"): history widths of the decentralized runs.
#   DEGNN_ACC_MODEL (default sage): gcn reads configs/pubmed_gcn.conf on Pubmed (no local bias).
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-3}
dataset=${2:-pubmed}
bin=${DEGNN_BUILD_DIR:-build}/runtime/degnn
[ -x "$bin" ] || { scripts/setup.sh && scripts/build.sh >/dev/null; }
case "$dataset" in
  pubmed)
    "$bin" partition --data data/pubmed --parts 4 --method metis --seed 1 --out /tmp/degnn-acc-pubmed-4 >/dev/null
    common=(--config-file=configs/pubmed_${DEGNN_ACC_MODEL:-sage}.conf --partitions /tmp/degnn-acc-pubmed-4 --layers 3
            --fanouts 10,10,10 --epochs 30 --eval-every 3 --no-progress) ;;
  synthetic)
    data=/tmp/degnn-bench/synth-mid-100k
    [ -f "$data/num-node-list.csv.gz" ] || "$bin" generate --out "$data" --nodes 100000 --edges 1000000 \
      --features 64 --classes 8 --homophily 0.5 --signal 0.25 --format csv >/dev/null
    [ -f "$data-4/partitions.meta" ] || "$bin" partition --data "$data" --parts 4 --method metis --seed 1 \
      --out "$data-4" >/dev/null
    common=(--data "$data" --partitions "$data-4" --model "${DEGNN_ACC_MODEL:-sage}" --layers 3 --fanouts 10,10,10 --hidden 64
            --batch-size 1024 --epochs 20 --eval-every 4 --lr 0.01 --dropout 0.5 --weight-decay 0 --no-progress) ;;
  *) echo "unknown dataset $dataset (pubmed or synthetic)" >&2; exit 2 ;;
esac
runs=("centralized 32 1")
for bits in ${DEGNN_ACC_BITS-8 4 2}; do runs+=("decentralized $bits 1"); done
for bias in ${DEGNN_ACC_BIAS-0.5}; do runs+=("decentralized 8 $bias"); done
out=$(mktemp)
for seed in $(seq "$seeds"); do
  for run in "${runs[@]}"; do
    set -- $run
    # History options belong to the decentralized pipeline only (degnn train refuses them else).
    extra=()
    [ "$1" = decentralized ] && extra=(--history-bits "$2" --local-bias "$3")
    line=$("$bin" train "${common[@]}" --pipeline "$1" "${extra[@]}" \
             --seed "$seed" --metrics "$out.m" | sed -n 's/^test accuracy \([0-9.]*\) .*/\1/p')
    bytes=$(python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print(sum(x["bytes"] for x in r)//len(r))' "$out.m")
    rm -f "$out.m"
    echo "$1 $2 $3 $seed $line $bytes" | tee -a "$out" >&2
  done
done
python3 - "$out" "$dataset" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
print(f"{sys.argv[2]}:")
print("| pipeline | history bits | local bias | test accuracy % (mean ± std) | MB per epoch | seeds |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
keys = []
for r in rows:
    if tuple(r[:3]) not in keys: keys.append(tuple(r[:3]))
for key in keys:
    sel = [r for r in rows if tuple(r[:3]) == key]
    a = [100 * float(r[4]) for r in sel]
    mb = st.mean(int(r[5]) for r in sel) / 1e6
    sd = st.stdev(a) if len(a) > 1 else 0.0
    central = key[0] == "centralized"
    print(f"| {key[0]} | {'-' if central else key[1]} | {'-' if central else key[2]} | "
          f"{st.mean(a):.2f} ± {sd:.2f} | {mb:.2f} | {len(a)} |")
PY
rm -f "$out"
