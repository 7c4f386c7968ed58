#!/usr/bin/env bash
# Decentralized against centralized training at equal optimiser steps (issue 16, item 1): the same
# 4 METIS partitions, seeds, batches and epochs for both pipelines, so both take the same steps;
# test accuracy at best validation (exact inference), the first epoch's and the per-epoch curve.
# Usage: scripts/convergence_study.sh [SEEDS]   (default 3)
#   DATASETS (default "pubmed amazon-photo amazon-computers citeseer"): bundled data/NAME, else
#     ../shared/datasets/NAME.
#   LAYERS (default "3 4"), BITS (default "8 2"): decentralized history widths.
#   EPOCHS (default 10; 50 on Cora, Citeseer and Pubmed, as their configs). EXTRA: more options for every run.
#   MODEL (default sage): sage runs the shipped GraphSAGE settings (configs/*_sage.conf); gat runs
#     GAT with configs/*_gat.conf's (hidden 64 in 8 heads, one output head, attention dropout
#     0.6, weight decay 0.001).
#   OUT (default /tmp/degnn-convergence, /tmp/degnn-convergence-gat for MODEL=gat): one line per run in OUT/runs.txt (dataset, layers,
#     pipeline, bits, seed, best-validation test accuracy, epoch-1 test accuracy, steps, the
#     per-epoch test accuracies), the metrics and logs there too.
#   Runs already in OUT/runs.txt are not run again, so an interrupted study continues.
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-3}
bin=${DEGNN_BUILD_DIR:-build}/runtime/degnn
[ -x "$bin" ] || { scripts/setup.sh && scripts/build.sh >/dev/null; }
model=${MODEL:-sage}
case "$model" in
  sage) settings=(--hidden 256 --weight-decay 0.005) ;;
  gat) settings=(--model gat --hidden 64 --heads 8 --output-heads 1 --attention-dropout 0.6
    --weight-decay 0.001) ;;
  *) echo "MODEL is sage or gat, not $model" >&2; exit 2 ;;
esac
default_out=/tmp/degnn-convergence
[ "$model" = sage ] || default_out=$default_out-$model
out=${OUT:-$default_out}
mkdir -p "$out"
touch "$out/runs.txt"
read -r -a extra <<<"${EXTRA:-}"
for name in ${DATASETS:-pubmed amazon-photo amazon-computers citeseer}; do
  data=data/$name
  [ -d "$data" ] || data=../shared/datasets/$name
  [ -d "$data" ] || { echo "no dataset $name (data/$name or ../shared/datasets/$name)" >&2; exit 2; }
  parts=$out/$name-4
  [ -f "$parts/partitions.meta" ] ||
    "$bin" partition --data "$data" --parts 4 --method metis --seed 1 --out "$parts" >/dev/null
  # The share of in-edges whose source another part owns: below the top layer, the expected share
  # of a local expansion's picks that are remote leaves (history) instead of expanded nodes.
  "$bin" info --data "$parts" | awk -v n="$name" '/^nodes/ {e = $4 + 0} /^[0-9]+ / {r += $6}
    END {printf "%s %.2f\n", n, 100 * r / e}' >"$out/$name.remote"
  # The shipped settings (configs/*_sage.conf). On the Planetoid splits (20 training nodes a
  # class) one step is an epoch, so those run 50 epochs as their configs do.
  epochs=${EPOCHS:-10}
  batch=64
  case "$name" in cora | citeseer | pubmed) epochs=${EPOCHS:-50}; batch=32 ;; esac
  for layers in ${LAYERS:-3 4}; do
    fanouts=$(printf '10,%.0s' $(seq "$layers")); fanouts=${fanouts%,}
    runs=("centralized 32")
    for bits in ${BITS:-8 2}; do runs+=("decentralized $bits"); done
    for seed in $(seq "$seeds"); do
      for run in "${runs[@]}"; do
        set -- $run
        key="$name $layers $1 $2 $seed"
        grep -q "^$key " "$out/runs.txt" && continue
        hist=()
        [ "$1" = decentralized ] && hist=(--history-bits "$2")
        metrics=$out/${key// /-}.jsonl
        rm -f "$metrics"
        "$bin" train --partitions "$parts" --pipeline "$1" "${hist[@]}" --layers "$layers" \
          --fanouts "$fanouts" "${settings[@]}" --batch-size "$batch" --lr 0.005 --dropout 0.6 \
          --epochs "$epochs" --eval-every 1 --seed "$seed" --no-progress \
          --metrics "$metrics" "${extra[@]}" >"$out/${key// /-}.log" 2>&1 ||
          { echo "run failed: $key (log $out/${key// /-}.log)" >&2; exit 1; }
        # best-validation test accuracy, epoch-1 test accuracy, steps in all
        line=$(python3 - "$metrics" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
ev = [x for x in r if x.get("evaluated")]
best = max(ev, key=lambda x: (x["valid_acc"], -x["epoch"]))
print(f'{best["test_acc"]:.4f} {ev[0]["test_acc"]:.4f} {sum(x["steps"] for x in r)} '
      + ",".join(f'{x["test_acc"]:.3f}' for x in ev))
PY
        )
        echo "$key $line" | tee -a "$out/runs.txt" >&2
      done
    done
  done
done
python3 - "$out/runs.txt" "$out" <<'PY'
import os, sys, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
def mean_sd(v):
    v = [100 * x for x in v]
    return st.mean(v), (st.stdev(v) if len(v) > 1 else 0.0)
def remote(name):
    f = os.path.join(sys.argv[2], name + ".remote")
    return open(f).read().split()[1] if os.path.exists(f) else "-"
groups = {}
for r in rows:
    groups.setdefault((r[0], int(r[1])), {}).setdefault((r[2], r[3]), []).append(r)
keys = [("centralized", "32"), ("decentralized", "8"), ("decentralized", "2")]
print("| dataset | remote in-edges % | layers | steps | centralized | dec. 8-bit | dec. 2-bit "
      "| C - D8 | C - D2 | epoch-1 test C / D8 / D2 |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for (name, layers), g in groups.items():
    cells, means, first = [], {}, []
    for key in keys:
        sel = g.get(key, [])
        if not sel:
            cells.append("-")
            first.append("-")
            continue
        m, s = mean_sd([float(x[5]) for x in sel])
        means[key] = m
        cells.append(f"{m:.2f} ± {s:.2f}" + ("" if len(sel) == 3 else f" ({len(sel)} seeds)"))
        first.append(f"{mean_sd([float(x[6]) for x in sel])[0]:.1f}")
    gaps = [f"{means[keys[0]] - means[k]:+.2f}" if keys[0] in means and k in means else "-"
            for k in keys[1:]]
    steps = "/".join(sorted({x[7] for x in sum(g.values(), [])}))
    print(f"| {name} | {remote(name)} | {layers} | {steps} | " + " | ".join(cells) + " | "
          + " | ".join(gaps) + f" | {' / '.join(first)} |")
PY
