#!/usr/bin/env bash
# Overhead of coordinated checkpoints: the same in-process decentralized run (Cora, 3 parts,
# 3 layers, hidden 256, batch 8: 7 steps an epoch) without checkpoints, with one at each epoch
# end, and with one after every step, alternating, RUNS times 8 epochs each. Prints the median
# time per step of each mode and one JSON line.
# Usage: scripts/bench_checkpoints.sh [RUNS]   (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
degnn=${DEGNN_BUILD_DIR:-build}/runtime/degnn
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for ((r = 1; r <= runs; ++r)); do
  for mode in off epoch every1; do
    rm -rf "$work/ck"
    extra=()
    [[ $mode == epoch ]] && extra=(--checkpoint-dir "$work/ck")
    [[ $mode == every1 ]] && extra=(--checkpoint-dir "$work/ck" --checkpoint-every 1)
    "$degnn" train --data data/cora --pipeline decentralized --parts 3 --layers 3 \
      --fanouts 5,5,5 --hidden 256 --epochs 8 --batch-size 8 --eval-every 0 --no-progress \
      --seed 3 "${extra[@]}" 2>&1 |
      awk -v m="$mode" '/^epoch/ {for (i = 1; i <= NF; i++) if ($i == "time") {t = $(i + 1); sub("s", "", t); print m, t}}'
  done
  echo "run $r of $runs done" >&2
done >"$work/times"
python3 - "$work/times" <<'PY'
import json, statistics, sys
times = {}
for line in open(sys.argv[1]):
    mode, t = line.split()
    times.setdefault(mode, []).append(float(t) / 7)  # 7 steps an epoch
out = {m: round(statistics.median(v), 4) for m, v in times.items()}
for m, v in out.items():
    print(f"{m:7s} median time per step {v:.4f} s over {len(times[m])} epochs")
print(json.dumps({"bench": "checkpoints", "median_step_s": out}))
PY
