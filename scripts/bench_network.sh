#!/usr/bin/env bash
# Epoch time and bytes of the centralized vs decentralized pipelines, each of 4 nodes a process in its
# own network namespace, every node's link rate-limited both ways by tc tbf
# (docs/design.md section 8).
# Usage (as root): [DEGNN_RATES="1gbit 10gbit" DEGNN_DATASETS="pubmed synth" DEGNN_LAYERS="2 3"
#   DEGNN_ALLREDUCE="ring star" ...] scripts/bench_network.sh
# DEGNN_CONF_EXTRA: more lines for every node's [node] settings, e.g. $'model = "gat"\nheads = 8'.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${DEGNN_BIN:-build/runtime/degnn}
WORK=${DEGNN_NETBENCH_WORK:-/tmp/degnn-netbench}
read -r -a RATES <<<"${DEGNN_RATES:-1gbit 10gbit}"
read -r -a DATASETS <<<"${DEGNN_DATASETS:-pubmed synth}"
read -r -a LAYERS <<<"${DEGNN_LAYERS:-2 3}"
read -r -a PIPELINES <<<"${DEGNN_PIPELINES:-centralized decentralized}"
read -r -a ALLREDUCES <<<"${DEGNN_ALLREDUCE:-ring}"   # ring (the default) and/or star
SYNTH=${DEGNN_SYNTH_DIR:-/tmp/degnn-bench/synth-1000000-10000000-128}
SYNTH_BATCHES=${DEGNN_SYNTH_BATCHES:-3}      # steps measured on the synthetic graph (of 25)
EPOCHS=${DEGNN_EPOCHS:-1}                    # epoch_s reported is the mean over the epochs
RETRIES=${DEGNN_RETRIES:-2}                  # reruns of a failed or hung run
# Per dataset (pubmed / synth): seconds one run (all 4 nodes) may take, and any one request between
# actors (node 0 gives up on a lost reply after that long; the run is then retried).
RUN_TIMEOUT_PUBMED=${DEGNN_RUN_TIMEOUT:-300}
RUN_TIMEOUT_SYNTH=${DEGNN_RUN_TIMEOUT:-1500}
REQ_TIMEOUT_PUBMED=${DEGNN_REQUEST_TIMEOUT:-30}
REQ_TIMEOUT_SYNTH=${DEGNN_REQUEST_TIMEOUT:-300}
RATE_CHECK=${DEGNN_RATE_CHECK:-1}            # 0 skips the quick tbf throughput check
NODES=4
# OpenMP threads per node process: the 4 nodes share this machine's cores (an oversubscribed
# OpenMP team spins against the others); on a real cluster each node would use its own cores.
NODE_THREADS=${DEGNN_NODE_THREADS:-$(( $(nproc) / NODES > 0 ? $(nproc) / NODES : 1 ))}
NS=degnn-nb-                                 # namespaces degnn-nb-0 .. degnn-nb-3
BRIDGE=degnnbr0
PORT=24600                                   # node K: 198.18.0.(K+1):PORT and PORT+1
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3

log() { echo "[bench_network] $*" >&2; }
die() { log "error: $*"; exit 1; }

NODE_PIDS=()
cleanup() {
  local rc=$? pid ns k
  trap - EXIT INT TERM
  for pid in "${NODE_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${NODE_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  NODE_PIDS=()
  # Whatever still runs inside our namespaces (also leftovers of an aborted earlier run).
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${NS}" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
  for ((k = 0; k < NODES; ++k)); do ip link del "dnb${k}h" 2>/dev/null || true; done
  return "$rc"
}

# ---------------------------------------------------------------- checks and set-up
[ "$(id -u)" = 0 ] || die "must run as root (creates network namespaces and tc qdiscs)"
for c in ip tc timeout; do command -v "$c" >/dev/null || die "$c not found"; done
[ -x "$BIN" ] || die "$BIN not found (build first: scripts/build.sh, or set DEGNN_BIN)"
BIN=$(readlink -f "$BIN")
case "$SYNTH_BATCHES$EPOCHS$RETRIES$RUN_TIMEOUT_SYNTH$REQ_TIMEOUT_SYNTH" in
  *[!0-9]*) die "DEGNN_SYNTH_BATCHES, DEGNN_EPOCHS, DEGNN_RETRIES, DEGNN_*_TIMEOUT must be integers" ;;
esac
mkdir -p "$WORK"
SESSION=$(date +%Y%m%dT%H%M%S)-$$
RESULTS=$WORK/results.jsonl

cleanup                                     # leftovers of a previous aborted run
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

rate_bps() {  # tc rate (N[k|m|g|t]bit) -> bits per second
  local r=${1,,} n unit
  [[ $r =~ ^([0-9]+)([kmgt]?)bit$ ]] || die "rate '$1': use N[k|m|g|t]bit, e.g. 1gbit"
  n=${BASH_REMATCH[1]}
  unit=${BASH_REMATCH[2]}
  case $unit in k) n=$((n * 1000)) ;; m) n=$((n * 1000000)) ;; g) n=$((n * 1000000000)) ;;
    t) n=$((n * 1000000000000)) ;; esac
  echo "$n"
}
for r in "${RATES[@]}"; do rate_bps "$r" >/dev/null; done

setup_net() {
  local k ns
  ip link add "$BRIDGE" type bridge
  # Keep bridged frames out of the host's iptables if br_netfilter is loaded (per bridge only).
  ip link set "$BRIDGE" type bridge nf_call_iptables 0 nf_call_ip6tables 0 nf_call_arptables 0 \
    2>/dev/null || true
  ip link set "$BRIDGE" up
  for ((k = 0; k < NODES; ++k)); do
    ns=$NS$k
    ip netns add "$ns"
    ip link add "dnb${k}h" type veth peer name "dnb${k}n"
    ip link set "dnb${k}n" netns "$ns"
    ip link set "dnb${k}h" master "$BRIDGE"
    ip link set "dnb${k}h" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "198.18.0.$((k + 1))/24" dev "dnb${k}n"
    ip -n "$ns" link set "dnb${k}n" up
  done
}

BURST=0
shape() {  # rate: tbf on both directions of every node's link
  local rate=$1 bps k
  bps=$(rate_bps "$rate")
  BURST=$((bps / 8 / 250))                  # 4 ms at the rate (>= rate/HZ for HZ >= 250)
  [ "$BURST" -ge 65536 ] || BURST=65536
  for ((k = 0; k < NODES; ++k)); do
    ip netns exec "$NS$k" tc qdisc replace dev "dnb${k}n" root tbf rate "$rate" burst "$BURST" latency 20ms
    tc qdisc replace dev "dnb${k}h" root tbf rate "$rate" burst "$BURST" latency 20ms
  done
}

NETEM=no
check_netem() {
  if ip netns exec "${NS}0" tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then
    ip netns exec "${NS}0" tc qdisc del dev lo root 2>/dev/null || true
    NETEM=yes
    log "netem is available but not used: no delay is added, links are only rate-limited"
  else
    log "netem is not available on this machine: no delay is added, links are only rate-limited (tbf)"
  fi
}

# Quick tbf check: one TCP stream of ~0.5 s at the rate each way between node 1 and the bridge
# (given a temporary address), so each direction crosses exactly one tbf.
NETCHECK=$WORK/netcheck.py
cat >"$NETCHECK" <<'PY'
import socket, sys, time
mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "recv":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port)); s.listen(1); s.settimeout(20)
    c, _ = s.accept(); c.settimeout(60)
    buf = bytearray(1 << 20); n = 0; t0 = None
    while True:
        k = c.recv_into(buf)
        if not k: break
        if t0 is None: t0 = time.perf_counter()
        n += k
    print(f"{n * 8 / max(1e-9, time.perf_counter() - t0):.0f}")
else:
    deadline = time.time() + 10
    while True:
        try:
            c = socket.create_connection((host, port), timeout=5); break
        except OSError:
            if time.time() > deadline: raise
            time.sleep(0.05)
    total = int(sys.argv[4]); chunk = b"\0" * (1 << 20); sent = 0
    while sent < total:
        c.sendall(chunk); sent += len(chunk)
    c.close()
PY

stream() {  # up|down nbytes -> bits/s of one TCP stream node 1 -> host (up) or host -> node 1 (down)
  local srv
  if [ "$1" = up ]; then
    "$PY" "$NETCHECK" recv 198.18.0.254 5201 >"$WORK/netcheck.out" &
    srv=$!
    NODE_PIDS+=("$srv")
    ip netns exec "${NS}1" "$PY" "$NETCHECK" send 198.18.0.254 5201 "$2"
  else
    ip netns exec "${NS}1" "$PY" "$NETCHECK" recv 198.18.0.2 5202 >"$WORK/netcheck.out" &
    srv=$!
    NODE_PIDS+=("$srv")
    "$PY" "$NETCHECK" send 198.18.0.2 5202 "$2"
  fi
  wait "$srv"
  NODE_PIDS=()
  cat "$WORK/netcheck.out"
}

RATE_NOTE=""
BASELINE=""
rate_check() {  # rate (tbf already applied), or "none" before any qdisc: the unshaped path
  local rate=$1 bps nbytes up down verdict
  ip addr add 198.18.0.254/24 dev "$BRIDGE"
  if [ "$rate" = none ]; then
    BASELINE=$(stream down 400000000)
    ip addr del 198.18.0.254/24 dev "$BRIDGE"
    log "path without tbf (one TCP stream, host -> node 1, 400 MB): $((BASELINE / 1000000)) Mbit/s"
    RATE_NOTE+="no tbf: $((BASELINE / 1000000)) Mbit/s; "
    return 0
  fi
  bps=$(rate_bps "$rate")
  nbytes=$((bps / 8 / 2))                   # ~0.5 s at the rate
  [ "$nbytes" -le 400000000 ] || nbytes=400000000
  up=$(stream up "$nbytes")                 # crosses node 1's namespace-side tbf only
  down=$(stream down "$nbytes")             # crosses node 1's host-side tbf only
  ip addr del 198.18.0.254/24 dev "$BRIDGE"
  verdict=$("$PY" - "$bps" "$up" "$down" "${BASELINE:-0}" <<'PY'
import sys
bps, up, down, base = (float(x) for x in sys.argv[1:])
def one(x):
    if x > 1.10 * bps: return "NOT LIMITED"
    if x < 0.80 * bps:
        return ("below the rate: one stream cannot fill it on this CPU"
                + (f", unshaped path {base / 1e9:.2f} Gbit/s" if base else ""))
    return "limited"
print(f"upload {up / 1e9:.2f} Gbit/s ({one(up)}), download {down / 1e9:.2f} Gbit/s ({one(down)})")
PY
)
  log "tbf check at $rate (one TCP stream, $((nbytes / 1000000)) MB each way): $verdict"
  RATE_NOTE+="$rate: $verdict; "
  case $verdict in *"NOT LIMITED"*) die "tbf does not limit at $rate" ;; esac
}

# ---------------------------------------------------------------- data and partitions
ensure_parts() {  # data-dir out-dir
  local data=$1 out=$2
  [ -f "$out/partitions.meta" ] && return 0
  log "partitioning $data into 4 METIS parts -> $out"
  rm -rf "$out.tmp"
  "$BIN" partition --data "$data" --parts 4 --method metis --seed 1 --out "$out.tmp" >"$WORK/partition.log" 2>&1 ||
    { cat "$WORK/partition.log" >&2; die "partition failed"; }
  rm -rf "$out"
  mv "$out.tmp" "$out"
}

declare -A DATA_DIR PARTS MAXB LABEL RUN_TIMEOUT REQ_TIMEOUT
for d in "${DATASETS[@]}"; do
  case $d in
    pubmed)
      DATA_DIR[$d]=data/pubmed; MAXB[$d]=0; LABEL[$d]=Pubmed
      RUN_TIMEOUT[$d]=$RUN_TIMEOUT_PUBMED; REQ_TIMEOUT[$d]=$REQ_TIMEOUT_PUBMED ;;
    synth)
      if [ ! -f "$SYNTH/num-node-list.csv.gz" ]; then
        log "generating the 1M-node synthetic graph in $SYNTH"
        "$BIN" generate --out "$SYNTH" --nodes 1000000 --edges 10000000 --features 128 --classes 16 --format csv >/dev/null
      fi
      DATA_DIR[$d]=$SYNTH; MAXB[$d]=$SYNTH_BATCHES; LABEL[$d]=synthetic-1M
      RUN_TIMEOUT[$d]=$RUN_TIMEOUT_SYNTH; REQ_TIMEOUT[$d]=$REQ_TIMEOUT_SYNTH ;;
    *) die "unknown dataset '$d' (pubmed or synth)" ;;
  esac
  PARTS[$d]=$WORK/$d-4
  ensure_parts "${DATA_DIR[$d]}" "${PARTS[$d]}"
done

# ---------------------------------------------------------------- one run: 4 node processes
wait_others() {  # give nodes 1..3 up to 30 s to stop after node 0, then stop them
  local t=0 pid alive
  while [ $t -lt 150 ]; do
    alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 1 ] || break
    sleep 0.2
    t=$((t + 1))
  done
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "$@"; do wait "$pid" 2>/dev/null || true; done
}

FAILED=0
RC0=0
launch() {  # dataset dir: nodes 1..3 in the background, node 0 last; sets RC0
  local d=$1 dir=$2 k others=() pid0 limit=${RUN_TIMEOUT[$1]}
  RC0=0
  for ((k = 1; k < NODES; ++k)); do
    timeout -k 10 "$limit" ip netns exec "$NS$k" "$BIN" node --config-file="$dir/cluster.conf" --id "$k" \
      >"$dir/node$k.log" 2>&1 &
    others+=("$!")
    NODE_PIDS+=("$!")
  done
  timeout -k 10 "$limit" ip netns exec "${NS}0" "$BIN" node --config-file="$dir/cluster.conf" --id 0 \
    >"$dir/node0.out" 2>"$dir/node0.err" &
  pid0=$!
  NODE_PIDS+=("$pid0")
  wait "$pid0" || RC0=$?
  wait_others "${others[@]}"
  NODE_PIDS=()
  [ "$RC0" = 0 ] && grep -q '"node_summary":true' "$dir/node0.out" && return 0
  [ "$RC0" != 0 ] || RC0=1
  log "run failed (node 0 exit $RC0$([ "$RC0" = 124 ] && echo ", killed after ${limit}s")); logs in $dir"
  tail -n 3 "$dir/node0.err" "$dir"/node[123].log >&2 || true
  return 1
}

run_one() {  # dataset layers rate pipeline allreduce
  local d=$1 L=$2 rate=$3 pipe=$4 ar=$5 k fan dir peers="" t0 t1 load attempt=1
  fan=$(printf '10,%.0s' $(seq "$L"))
  fan=${fan%,}
  dir=$WORK/runs/$d-L$L-$rate-$pipe-$ar
  rm -rf "$dir" "$dir".failed-*
  for ((k = 0; k < NODES; ++k)); do peers+="${peers:+,}198.18.0.$((k + 1)):$PORT"; done
  while :; do
    mkdir -p "$dir"
    cat >"$dir/cluster.conf" <<CONF
[node]
partitions = "${PARTS[$d]}"
peers = "$peers"
pipeline = "$pipe"
allreduce = "$ar"
layers = $L
fanouts = "$fan"
hidden = 128
batch-size = 1024
epochs = $EPOCHS
eval-every = 0
seed = 1
max-batches = ${MAXB[$d]}
metrics = "$dir/metrics.jsonl"
no-progress = true
timeout = ${REQ_TIMEOUT[$d]}
connect-timeout = 300
threads = $NODE_THREADS
# Plain TCP: the bridge and namespaces are this script's own, nothing else is on them.
insecure = true
${DEGNN_CONF_EXTRA:-}
CONF
    load=$(cut -d' ' -f1 /proc/loadavg)
    log "run: ${LABEL[$d]}, $L layers, $rate, $pipe, $ar all-reduce (attempt $attempt, load average $load)"
    t0=$(date +%s.%N)
    if launch "$d" "$dir"; then t1=$(date +%s.%N); break; fi
    t1=$(date +%s.%N)
    if [ "$attempt" -gt "$RETRIES" ]; then FAILED=$((FAILED + 1)); break; fi
    mv "$dir" "$dir.failed-$attempt"
    attempt=$((attempt + 1))
  done
  "$PY" - "$dir" "$SESSION" "${LABEL[$d]}" "$L" "$rate" "$pipe" "$RC0" "$t0" "$t1" "$NETEM" "$BURST" \
    "${MAXB[$d]}" "$EPOCHS" "$load" "$attempt" "$ar" >>"$RESULTS" <<'PY'
import json, os, re, sys
d, session, label, L, rate, pipe, rc, t0, t1, netem, burst, maxb, epochs, load, attempt, ar = sys.argv[1:]
row = {"session": session, "dataset": label, "layers": int(L), "rate": rate, "pipeline": pipe,
       "allreduce": ar,
       "rc": int(rc), "attempts": int(attempt), "wall_s": round(float(t1) - float(t0), 3),
       "loadavg_1m_before": float(load),
       "netem_delay": netem == "yes",
       "tbf_burst_bytes": int(burst), "max_batches": int(maxb), "epochs": int(epochs), "dir": d}
m = os.path.join(d, "metrics.jsonl")
eps = [json.loads(l) for l in open(m)] if os.path.exists(m) else []
if eps:
    mean = lambda k: sum(e.get(k, 0) for e in eps) / len(eps)
    row.update({k: round(mean(k), 4) for k in
                ("epoch_s", "sample_s", "overlap_s", "compute_s", "allreduce_s")})
    row["epoch_s_each"] = [e["epoch_s"] for e in eps]
    row["steps"] = eps[0]["steps"]
    row["bytes"] = round(mean("bytes"))
    row["bytes_by_kind"] = eps[-1]["bytes_by_kind"]
    row["setup_bytes"] = eps[0].get("setup_bytes", 0)
    row["peak_rss_mib_node0"] = max(e.get("peak_rss_mib", 0) for e in eps)
out = open(os.path.join(d, "node0.out")).read() if os.path.exists(os.path.join(d, "node0.out")) else ""
h = re.search(r"history set up \([^)]*\) in ([0-9.]+) s \(([0-9.]+) MB\)", out)
if h: row["init_s"], row["init_mb"] = float(h.group(1)), float(h.group(2))
for line in out.splitlines():
    if '"node_summary":true' in line:
        s = json.loads(line)
        row["summary_bytes"] = s["bytes"]
        row["test_acc"] = s["test_acc"]
        row["step_losses"] = s["step_losses"]
        row["replicas_identical"] = s["replicas_identical"]
print(json.dumps(row))
PY
  tail -n 1 "$RESULTS" | "$PY" -c '
import json, sys
r = json.loads(sys.stdin.read())
if "epoch_s" not in r: sys.exit(print("[bench_network]   failed, no metrics", file=sys.stderr))
print("[bench_network]   steps %s  epoch %ss (sample %s, overlapped %s, compute %s, all-reduce %s)  %.2f MB  init %ss  wall %.1fs"
      % (r.get("steps"), r.get("epoch_s"), r.get("sample_s"), r.get("overlap_s"), r.get("compute_s"),
         r.get("allreduce_s"), r.get("bytes", 0) / 1e6, r.get("init_s", "-"), r["wall_s"]), file=sys.stderr)'
}

# ---------------------------------------------------------------- the matrix
START=$(date +%s)
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
setup_net
check_netem
[ "$RATE_CHECK" = 0 ] || rate_check none
log "4 namespaces ${NS}0..3 (198.18.0.1-4/24) on bridge $BRIDGE; binary $BIN; $NODE_THREADS OpenMP thread(s) per node; work dir $WORK"
for rate in "${RATES[@]}"; do
  shape "$rate"
  log "rate $rate on both directions of every node's link (tbf burst $BURST B, latency 20ms)"
  [ "$RATE_CHECK" = 0 ] || rate_check "$rate"
  for d in "${DATASETS[@]}"; do
    for L in "${LAYERS[@]}"; do
      for ar in "${ALLREDUCES[@]}"; do
        for pipe in "${PIPELINES[@]}"; do run_one "$d" "$L" "$rate" "$pipe" "$ar"; done
      done
    done
  done
done
ELAPSED=$(($(date +%s) - START))
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- table and plot
PLOTDAT=$WORK/bench_network.dat
"$PY" - "$RESULTS" "$SESSION" "$PLOTDAT" "$NETEM" "$RATE_NOTE" "$ELAPSED" "$LOAD_START" "$LOAD_END" <<'PY'
import json, os, sys
path, session, plotdat, netem, rate_note, elapsed, load0, load1 = sys.argv[1:]
rows = [r for r in map(json.loads, open(path)) if r.get("session") == session]
f = lambda x, n=3: "-" if x is None else f"{x:.{n}f}"
print()
print(f"Network benchmark: 4 node processes, one network namespace each, links rate-limited by tc tbf "
      f"on both directions; {'netem available but ' if netem == 'yes' else 'netem not available: '}no delay added.")
print(f"4 METIS parts, fanouts 10 per layer, hidden 128, batch 1024, seed 1, no evaluation. "
      f"Total time {int(elapsed) // 60} min {int(elapsed) % 60} s on {os.cpu_count()} cores; "
      f"load average {load0} at the start, {load1} at the end (the machine may be shared).")
if rate_note: print(f"tbf check: {rate_note.rstrip('; ')}")
print()
print("| dataset | layers | rate | pipeline | all-reduce | steps | epoch s | sample s | overlapped s | compute s | all-reduce s "
      "| MB sent | one-time init s (not in epoch) | speedup dec vs cen (time cen/dec) | byte ratio (cen/dec) | wall s |")
print("| --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
key = lambda r: (r["dataset"], r["layers"], r["rate"], r.get("allreduce", "star"))
by = {(key(r), r["pipeline"]): r for r in rows}
plot = []
for r in rows:
    c, e = by.get((key(r), "centralized")), by.get((key(r), "decentralized"))
    speed = ratio = "-"
    if r["pipeline"] == "decentralized" and c and e and c.get("epoch_s") and e.get("epoch_s"):
        speed = f"{c['epoch_s'] / e['epoch_s']:.2f}x"
        ratio = f"{c['bytes'] / max(1, e['bytes']):.2f}x"
    steps = r.get("steps")
    if steps is not None and r.get("max_batches"): steps = f"{steps} (max-batches)"
    init = f(r.get("init_s"), 2) if r["pipeline"] == "decentralized" else "-"
    if r.get("init_mb") is not None: init += f" ({r['init_mb']:.0f} MB)"
    status = "" if r["rc"] == 0 else f" FAILED rc={r['rc']}"
    if r.get("attempts", 1) > 1: status += f" (attempt {r['attempts']})"
    print(f"| {r['dataset']} | {r['layers']} | {r['rate']} | {r['pipeline']}{status} | {r.get('allreduce', 'star')} "
          f"| {steps if steps is not None else '-'} "
          f"| {f(r.get('epoch_s'))} | {f(r.get('sample_s'))} | {f(r.get('overlap_s'))} | {f(r.get('compute_s'))} "
          f"| {f(r.get('allreduce_s'))} | {f(r['bytes'] / 1e6 if 'bytes' in r else None, 2)} | {init} | {speed} | {ratio} "
          f"| {r['wall_s']:.1f} |")
    if r["pipeline"] == "decentralized" and c:
        label = f"{r['dataset']} L{r['layers']} {r['rate']} {r.get('allreduce', 'star')}".replace("synthetic-1M", "synth-1M")
        plot.append((label, c.get("epoch_s") or 0, r.get("epoch_s") or 0))
print()
print("epoch s = wall time of node 0's epoch loop (steps + the last all-reduce); synthetic-1M: only the "
      "max-batches steps. The decentralized history initialisation (one exact inference pass) runs "
      "before the epoch clock starts and is listed separately. sample/compute: mean over the 4 workers; "
      "overlapped: time a step phase and an all-reduce ran at once (pipelined steps). wall s: all 4 processes, "
      "start to exit (loading partitions, connecting, init, epoch, shutdown).")
with open(plotdat, "w") as out:
    for label, c, e in plot: out.write(f"\"{label}\" {c} {e}\n")
PY

# shellcheck source=scripts/plot_helpers.sh
source scripts/plot_helpers.sh
if need_gnuplot && [ -s "$PLOTDAT" ]; then
  term=$(gnuplot_term)
  gnuplot <<GP
set terminal $term size 1200,600
set output "$WORK/bench_network.png"
set title "Epoch time over tc-tbf rate-limited links, 4 node processes (no delay; synth-1M: ${SYNTH_BATCHES} steps)"
set ylabel "epoch time (s, log scale)"
set logscale y
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -30 noenhanced
set key top left
set grid ytics
plot "$PLOTDAT" using 2:xtic(1) title "centralized", "" using 3 title "decentralized"
GP
  echo "plot: $WORK/bench_network.png"
fi
echo "results (one JSON line per run, session $SESSION): $RESULTS"
[ "$FAILED" = 0 ] || die "$FAILED run(s) failed"
