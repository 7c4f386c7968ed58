#!/usr/bin/env bash
# Dense against compressed-row input features (--sparse-features, issue 16 item 4): the same run
# (seed, batches, epochs) alternated REPEATS times, medians of the epoch's training time, its
# evaluation and the process's peak RSS, and the test accuracy of each.
# Usage: scripts/bench_sparse.sh [DATASET] [REPEATS]   (defaults: coauthor-cs 3)
#   DATASET: data/NAME or ../shared/datasets/NAME. EPOCHS (default 1), MAX_BATCHES (default 0: all).
#   PIPELINE (default single): centralized or decentralized runs an in-process cluster of PARTS
#   (default 4) METIS parts from a partition set cut once per layout (dense rows for the dense
#   run, compressed for the other), 3 layers with fanouts 10,10,10 for the decentralized one.
#   Prints one table row per variant and a JSON line.
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:-coauthor-cs}
repeats=${2:-3}
bin=${DEGNN_BUILD_DIR:-build}/runtime/degnn
[ -x "$bin" ] || { scripts/setup.sh && scripts/build.sh >/dev/null; }
data=data/$name
[ -d "$data" ] || data=../shared/datasets/$name
[ -d "$data" ] || { echo "no dataset $name (data/$name or ../shared/datasets/$name)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (Debian package time: apt-get install time)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$bin" info --data "$data" >/dev/null  # the first load writes the cache outside the timings
pipeline=${PIPELINE:-single}
model=(--layers 2 --fanouts 10,25)
[ "$pipeline" = decentralized ] && model=(--layers 3 --fanouts 10,10,10)
if [ "$pipeline" != single ]; then
  for variant in dense sparse; do
    cut=()
    [ "$variant" = sparse ] && cut=(--sparse-features)
    "$bin" partition --data "$data" --parts "${PARTS:-4}" --out "$out/set-$variant" "${cut[@]}" \
      >/dev/null
  done
fi
for r in $(seq "$repeats"); do
  for variant in dense sparse; do
    flag=()
    [ "$variant" = sparse ] && flag=(--sparse-features)
    input=(--data "$data")
    [ "$pipeline" != single ] && input=(--partitions "$out/set-$variant")
    /usr/bin/time -f "%M" -o "$out/rss" "$bin" train "${input[@]}" --pipeline "$pipeline" \
      --epochs "${EPOCHS:-1}" --max-batches "${MAX_BATCHES:-0}" --hidden 256 --batch-size 64 \
      "${model[@]}" --seed 1 --no-progress --metrics "$out/m.jsonl" "${flag[@]}" \
      >"$out/log" 2>&1 || { cat "$out/log" >&2; exit 1; }
    python3 - "$out/m.jsonl" "$(cat "$out/rss")" "$variant" >>"$out/runs" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
print(sys.argv[3], sum(x["epoch_s"] for x in r) / len(r), sum(x.get("eval_s", 0) for x in r) / len(r),
      int(sys.argv[2]) / 1024, r[-1].get("test_acc", 0))
PY
    rm -f "$out/m.jsonl"
    tail -1 "$out/runs" >&2
  done
done
python3 - "$out/runs" "$name" "$pipeline" <<'PY'
import json, sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
res = {}
print(f"{sys.argv[2]} ({sys.argv[3]}): | features | epoch s (median) | eval s | peak RSS MiB | "
      "test accuracy |")
for v in ("dense", "sparse"):
    sel = [r for r in rows if r[0] == v]
    res[v] = {k: st.median(float(r[i]) for r in sel)
              for k, i in (("epoch_s", 1), ("eval_s", 2), ("peak_rss_mib", 3), ("test_acc", 4))}
    print(f"| {v} | {res[v]['epoch_s']:.2f} | {res[v]['eval_s']:.2f} | {res[v]['peak_rss_mib']:.0f} | "
          f"{100 * res[v]['test_acc']:.2f} |")
res["speedup"] = res["dense"]["epoch_s"] / res["sparse"]["epoch_s"]
print(f"epoch speed-up {res['speedup']:.2f}x")
print(json.dumps({"bench": "sparse_features", "dataset": sys.argv[2], "pipeline": sys.argv[3],
                  **res}))
PY
