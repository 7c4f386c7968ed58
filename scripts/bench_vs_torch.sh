#!/usr/bin/env bash
# Issue 3's speed goal: `degnn bench train` (synthetic 1M nodes, ~20M in-edges, fanouts 10,25,
# hidden 128, batch 1024, GraphSAGE-mean) against scripts/torch_reference.py, the same training in
# plain PyTorch on the CPU, same machine, one after the other. Prints both JSON lines and the ratio
# of median epoch times (torch / degnn; the goal is >= 2).
#
# Usage (after a build; needs Debian's python3-torch and python3-numpy):
#     scripts/bench_vs_torch.sh                    # 3 full epochs each
#     EPOCHS=3 MAX_BATCHES=20 scripts/bench_vs_torch.sh   # the same first 20 batches' count per epoch
# The first run generates the graph (~30 s) and the torch side's .npy cache (a few minutes); neither
# is timed. Run it on an otherwise idle machine: both sides use 2 threads.
set -euo pipefail
cd "$(dirname "$0")/.."
DEGNN=${DEGNN:-build/runtime/degnn}
PYTHON=${PYTHON:-/usr/bin/python3}
EPOCHS=${EPOCHS:-3}
MAX_BATCHES=${MAX_BATCHES:-0}
WORK=${WORK:-/tmp/degnn-bench}
DATA=$WORK/synth-1000000-10000000-128

degnn_json=$("$DEGNN" bench train --epochs "$EPOCHS" --max-batches "$MAX_BATCHES" --work "$WORK" |
  grep '^{')
echo "$degnn_json"
torch_json=$("$PYTHON" scripts/torch_reference.py --data "$DATA" --epochs "$EPOCHS" \
  --max-batches "$MAX_BATCHES" | grep '^{')
echo "$torch_json"
"$PYTHON" - "$degnn_json" "$torch_json" <<'EOF'
import json, sys
d, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
r = t["median_epoch_s"] / d["median_epoch_s"]
print(f"median epoch: degnn {d['median_epoch_s']:.3f} s, torch {t['median_epoch_s']:.3f} s "
      f"({t['batches_per_epoch']} batches/epoch, torch {t['torch']}, {t['threads']} threads): "
      f"degnn is {r:.2f}x faster (goal >= 2x): {'met' if r >= 2 else 'NOT met'}")
print(json.dumps({"bench": "train_vs_torch", "degnn_median_epoch_s": d["median_epoch_s"],
                  "torch_median_epoch_s": t["median_epoch_s"], "ratio": round(r, 3)}))
EOF
