#!/usr/bin/env bash
# Test accuracy of the decentralized pipeline (history at 8, 4 and 2 bits) against the centralized
# one on the same 4 METIS partitions of Pubmed, 3 layers (so history is used), seeds 1..N.
# Usage: scripts/accuracy_pipelines.sh [SEEDS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${1:-3}
bin=${DEGNN_BUILD_DIR:-build}/runtime/degnn
[ -x "$bin" ] || { scripts/setup.sh && scripts/build.sh >/dev/null; }
common=(--config-file=configs/pubmed_sage.conf --parts 4 --layers 3 --fanouts 10,10,10 --epochs 30
        --eval-every 3 --no-progress)
out=$(mktemp)
for seed in $(seq "$seeds"); do
  for run in "centralized 32" "decentralized 8" "decentralized 4" "decentralized 2"; do
    set -- $run
    acc=$("$bin" train "${common[@]}" --pipeline "$1" --history-bits "$2" --seed "$seed" |
          sed -n 's/^test accuracy \([0-9.]*\) .*/\1/p')
    echo "$1 $2 $seed $acc" | tee -a "$out" >&2
  done
done
python3 - "$out" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
print("| pipeline | history bits | test accuracy % (mean ± std) | seeds |")
print("| --- | ---: | ---: | ---: |")
for key in [("centralized", "32"), ("decentralized", "8"), ("decentralized", "4"), ("decentralized", "2")]:
    a = [100 * float(r[3]) for r in rows if (r[0], r[1]) == key]
    if a:
        sd = st.stdev(a) if len(a) > 1 else 0.0
        print(f"| {key[0]} | {key[1] if key[0] != 'centralized' else '-'} | {st.mean(a):.2f} ± {sd:.2f} | {len(a)} |")
PY
rm -f "$out"
