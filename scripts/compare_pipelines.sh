#!/usr/bin/env bash
# Reproduces the communication table of the decentralized issue: bytes sent between nodes per
# epoch (Pubmed) or per step (1M-node synthetic graph, --max-batches steps), by message kind, for
# the centralized (DistDGL-style) and decentralized (DEGNN) pipelines on the same 4 METIS
# partitions, same seed and fanouts (10 per layer), for 2, 3 and 4 layers. Counted, not estimated.
# Usage: scripts/compare_pipelines.sh [LAYERS...]     (default: 2 3 4)
#   DEGNN_SYNTH_BATCHES=3 (steps measured on the synthetic graph), DEGNN_SKIP_SYNTH=1 to skip it,
#   DEGNN_SKIP_PUBMED=1 to skip Pubmed, EXTRA: more options for every run (e.g. EXTRA="--model gat
#   --heads 8" for GAT; DEGNN_WORK then keeps its metrics apart),
#   PLOT=FILE.png draws MB per step against the layers, both pipelines, log scale (gnuplot-nox is
#   installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
layers=("${@:-2 3 4}")
[ $# -gt 0 ] || layers=(2 3 4)
bin=${DEGNN_BUILD_DIR:-build}/runtime/degnn
[ -x "$bin" ] || { scripts/setup.sh && scripts/build.sh >/dev/null; }
work=${DEGNN_WORK:-/tmp/degnn-compare}
read -r -a extra <<<"${EXTRA:-}"
mkdir -p "$work"
out="$work/metrics.jsonl"
: > "$out"

run() {  # dataset-label data-dir partitions-dir layers pipeline extra...
  local label=$1 data=$2 parts=$3 L=$4 pipe=$5; shift 5
  local fan; fan=$(printf '10%.0s,' $(seq "$L")); fan=${fan%,}
  echo "== $label, $L layers, $pipe" >&2
  "$bin" train --data "$data" --partitions "$parts" --pipeline "$pipe" --layers "$L" --fanouts "$fan" \
    --hidden 128 --epochs 1 --eval-every 0 --seed 1 --timeout 1200 --no-progress --metrics "$work/m.json" "$@" "${extra[@]}" >&2
  python3 - "$label" "$L" "$pipe" "$work/m.json" >>"$out" <<'PY'
import json, sys
label, L, pipe, path = sys.argv[1:]
r = [json.loads(l) for l in open(path)][-1]
print(json.dumps({"dataset": label, "layers": int(L), "pipeline": pipe, "steps": r["steps"],
                  "bytes": r["bytes"], "by_kind": r["bytes_by_kind"], "epoch_s": r["epoch_s"],
                  "setup_bytes": r.get("setup_bytes", 0)}))
PY
  rm -f "$work/m.json"
}

if [ "${DEGNN_SKIP_PUBMED:-0}" != 1 ]; then
  "$bin" partition --data data/pubmed --parts 4 --method metis --seed 1 --out "$work/pubmed-4" >/dev/null
  for L in "${layers[@]}"; do
    for pipe in centralized decentralized; do run pubmed data/pubmed "$work/pubmed-4" "$L" "$pipe" --batch-size 1024; done
  done
fi
if [ "${DEGNN_SKIP_SYNTH:-0}" != 1 ]; then
  synth=/tmp/degnn-bench/synth-1000000-10000000-128
  # CSV (features with 6 significant digits): the graph the recorded results were measured on.
  [ -f "$synth/num-node-list.csv.gz" ] || "$bin" generate --out "$synth" --nodes 1000000 --edges 10000000 \
    --features 128 --classes 16 --format csv >/dev/null
  [ -f "$work/synth-4/partitions.meta" ] || "$bin" partition --data "$synth" --parts 4 --method metis --seed 1 \
    --out "$work/synth-4" >/dev/null
  for L in "${layers[@]}"; do
    for pipe in centralized decentralized; do
      run synthetic-1M "$synth" "$work/synth-4" "$L" "$pipe" --batch-size 1024 --max-batches "${DEGNN_SYNTH_BATCHES:-3}"
    done
  done
fi

python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def mb(x): return f"{x / 1e6:.2f}"
print("| dataset | layers | steps | pipeline | total MB | w/o all-reduce MB | by kind (MB) | one-time setup MB |")
print("| --- | ---: | ---: | --- | ---: | ---: | --- | ---: |")
for r in rows:
    k = r["by_kind"]
    wo = r["bytes"] - k.get("allreduce_chunk", 0)
    kinds = ", ".join(f"{n} {mb(v)}" for n, v in sorted(k.items(), key=lambda kv: -kv[1]))
    print(f"| {r['dataset']} | {r['layers']} | {r['steps']} | {r['pipeline']} | {mb(r['bytes'])} | {mb(wo)} | {kinds} | {mb(r['setup_bytes'])} |")
print()
print("| dataset | layers | centralized / decentralized (total) | (without the all-reduce, identical in both) |")
print("| --- | ---: | ---: | ---: |")
by = {(r["dataset"], r["layers"], r["pipeline"]): r for r in rows}
for (d, L, p), c in by.items():
    if p != "centralized" or (d, L, "decentralized") not in by: continue
    e = by[(d, L, "decentralized")]
    wo = lambda r: r["bytes"] - r["by_kind"].get("allreduce_chunk", 0)
    print(f"| {d} | {L} | {c['bytes'] / max(1, e['bytes']):.1f}x | {wo(c) / max(1, wo(e)):.1f}x |")
PY

# How the bytes grow with the layers (PLOT=FILE.png, default none): MB per step, log scale, one
# line per dataset and pipeline.
if [[ -n ${PLOT:-} ]]; then
  # shellcheck source=scripts/plot_helpers.sh
  source scripts/plot_helpers.sh
  python3 - "$out" "$work/plot" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
series = {}
for r in rows:
    series.setdefault((r["dataset"], r["pipeline"]), []).append(
        (r["layers"], r["bytes"] / 1e6 / max(1, r["steps"])))
with open(sys.argv[2] + ".dat", "w") as out, open(sys.argv[2] + ".gp", "w") as gp:
    plots = []
    for i, ((d, p), pts) in enumerate(sorted(series.items())):
        for L, mb in sorted(pts):
            out.write(f"{L} {mb}\n")
        out.write("\n\n")
        dash = 1 if p == "centralized" else 2
        plots.append(f'"{sys.argv[2]}.dat" index {i} with linespoints lw 2 dt {dash} '
                     f'title "{d}, {p}"')
    gp.write("plot " + ", ".join(plots) + "\n")
PY
  if need_gnuplot && [[ -s $work/plot.dat ]]; then
    gnuplot <<GP
set terminal $(gnuplot_term) size 900,550
set output "$PLOT"
set title "Bytes sent between 4 nodes per step, fanout 10 per layer (counted)"
set xlabel "layers"
set ylabel "MB per step"
set logscale y
set xtics 1
set key top left noenhanced
set grid
load "$work/plot.gp"
GP
    echo "plot: $PLOT" >&2
  fi
fi
