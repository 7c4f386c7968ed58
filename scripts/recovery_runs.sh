#!/usr/bin/env bash
# Recovery from faults, measured (issue 12): 4 degnn node processes on loopback train Pubmed
# (decentralized, 3 layers) with coordinated checkpoints in a folder per node. Scenarios:
#   none          the fault-free run (the reference)
#   corrupt-1%    every node damages 1% of its messages to other nodes (--faults-corrupt 0.01)
#   dup-5%        every node delivers 5% of its messages to other nodes twice (--faults-duplicate)
#   delay-5%      every node holds 5% of its messages back 1-20 ms, so later ones overtake them
#                 (--faults-delay 0.05 --faults-delay-ms 20)
#   adopt-kill2   kill -9 of node 2 once node 0 logged epoch KILL_AT, --recover adopt: node 3
#                 takes over partition 2 inside the run
#   replace-kill2 the same with --recover replace: a fifth process joins through the seed and
#                 takes partition 2
#   adopt-stop2   SIGSTOP of node 2 for 10 s (SIGCONT after), --recover adopt: the heartbeat
#                 (250 ms, 12 missed) finds it lost
#   kill-node0    kill -9 of node 0 (the coordinator) once it logged epoch KILL_AT; every node is
#                 started again with --resume on its own folder
#   crash-node2   node 2 crashes at a named point (--crash-after-step KILL_AT), no --recover:
#                 restarted with --resume like kill-node0
# and, with --recover adopt, without any restart (no single point of failure, issue 29):
#   failover-kill0  kill -9 of node 0 once it logged epoch KILL_AT: node 1 takes over
#   failover-stop0  SIGSTOP of node 0 for 10 s: node 1 takes over; node 0 stops on waking
#   adopt-two       kill -9 of node 1, then of node 2 50 ms later: two views, nodes 0 and 3 finish
#   failover-two    kill -9 of node 0, then of node 3 50 ms later: node 1 takes over, 1 and 2 finish
# Prints one row per scenario (detected after, recovered or restarted and training again after,
# steps redone, final test accuracy, committed checkpoints lost, processes left; the failover rows
# also the new coordinator serving after and how many nodes reported the run's end) and a JSON
# line each. SCENARIOS="adopt-kill2 replace-kill2" runs those only (and the reference).
# Usage: scripts/recovery_runs.sh [EPOCHS] [KILL_AT]   (after scripts/build.sh)
# Environment: DATASET (default data/pubmed), EVAL_EVERY (5), MAX_BATCHES (steps an epoch, all),
# HEARTBEAT (node options of the in-run scenarios, "--heartbeat-ms 250 --heartbeat-misses 12"),
# PLOT (a .png to draw the fault timeline into; gnuplot-nox is installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/fault_helpers.sh
source scripts/fault_helpers.sh
epochs=${1:-40}
dataset=${DATASET:-data/pubmed}
eval_every=${EVAL_EVERY:-5}
heartbeat=${HEARTBEAT:---heartbeat-ms 250 --heartbeat-misses 12}
per_run=()
[[ -n ${MAX_BATCHES:-} ]] && per_run=(--max-batches "$MAX_BATCHES")
kill_at=${2:-17}
degnn=$PWD/${DEGNN_BUILD_DIR:-build}/runtime/degnn
work=$(mktemp -d)
pids=()
all_nodes=()  # options every node of the next start gets
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  [[ -n ${KEEP:-} ]] || rm -rf "$work"
}
trap cleanup EXIT INT TERM
"$degnn" partition --data "$dataset" --parts 4 --method metis --out "$work/parts" >/dev/null
port=$((21000 + RANDOM % 20000))

want() { [[ -z ${SCENARIOS:-} || " $SCENARIOS " == *" $1 "* ]]; }
# node_cmd K EPOCHS: the command line every node of a run shares (K names its folder)
node_cmd() {
  cmd=("$degnn" node --partitions "$work/parts" --pipeline decentralized --layers 3
    --fanouts 10,10,10 --epochs "$2" --eval-every "$eval_every" --seed 1 --no-progress --threads 1
    --checkpoint-dir "$work/ck-$1" "${per_run[@]}")
}

# start NAME EPOCHS [extra args for node 2] : 4 nodes in the background, node K logs to NAME-K.log
start() {
  local name=$1 ep=$2
  shift 2
  port=$((port + 7))
  pids=()
  for k in 0 1 2 3; do
    local role=(--join "127.0.0.1:$port" --rank-hint "$k")
    [[ $k == 0 ]] && role=(--is-seed --listen "127.0.0.1:$port" --nodes 4)
    local extra=("${all_nodes[@]}")
    [[ $k == 2 ]] && extra+=("$@")
    local resume=()
    [[ $name == *again* ]] && resume=(--resume "$work/ck-$k")
    node_cmd "$k" "$ep"
    "${cmd[@]}" "${role[@]}" "${resume[@]}" "${extra[@]}" >"$work/$name-$k.log" 2>&1 &
    pids+=($!)
  done
}
# await FILE EXTENDED-REGEX: until the file has such a line.
await() { until_true "'$2' in $1" grep -Eq "$2" "$1"; }
last_epoch() { grep -o '^epoch *[0-9]*' "$1" | tail -1 | tr -dc 0-9; }

row() {  # scenario detected restarted redone accuracy lost left refused
  printf '%-12s %10s %10s %6s %9s %5s %5s %8s\n' "$@"
  printf '{"scenario":"%s","detected_s":"%s","training_again_s":"%s","steps_redone":"%s","test_acc":"%s","commits_lost":"%s","processes_left":"%s","refused":"%s"}\n' "$@" >>"$work/json"
}
refused() { grep -o '"rejected":[0-9]*' "$1" | tail -1 | cut -d: -f2; }
printf '%-12s %10s %10s %6s %9s %5s %5s %8s\n' scenario detected restarted redone test_acc lost left refused

rm -rf "$work"/ck-*
start none "$epochs"
wait_all
ref=$(final_test "$work/none-0.log")
row none - - 0 "$ref" 0 "$(left)" "$(refused "$work/none-0.log")"

# Damaged and duplicated messages are refused where they arrive (a damaged one is sent again):
# nothing stops, and the result must be the fault-free run's.
for scenario in corrupt-1% dup-5% delay-5%; do
  want "$scenario" || continue
  rm -rf "$work"/ck-*
  case $scenario in
    corrupt-1%) all_nodes=(--faults-corrupt 0.01 --faults-seed 7) ;;
    dup-5%) all_nodes=(--faults-duplicate 0.05 --faults-seed 7) ;;
    delay-5%) all_nodes=(--faults-delay 0.05 --faults-delay-ms 20 --faults-seed 7) ;;
  esac
  start "$scenario" "$epochs"
  wait_all
  all_nodes=()
  row "$scenario" - - 0 "$(final_test "$work/$scenario-0.log")" 0 "$(left)" \
    "$(refused "$work/$scenario-0.log")"
  grep -h "faults injected" "$work/$scenario"-*.log >&2
done

newest_commit() { grep -h '^next_step' "$work"/ck-*/part-*/COMMIT 2>/dev/null | cut -d' ' -f2 |
  sort -n | tail -1; }

# In-run recovery: nothing is restarted by hand. Detected: from the fault until node 0 logs the
# lost node; training again: until node 0's next epoch line (the new view served everywhere and
# the history rebuilt).
for scenario in adopt-kill2 replace-kill2 adopt-stop2; do
  want "$scenario" || continue
  rm -rf "$work"/ck-*
  how=adopt
  [[ $scenario == replace-* ]] && how=replace
  # shellcheck disable=SC2206
  all_nodes=(--recover "$how" $heartbeat)
  start "$scenario" "$epochs"
  log0=$work/$scenario-0.log
  await "$log0" "^epoch *$kill_at "
  if [[ $scenario == *stop* ]]; then kill -STOP "${pids[2]}"; else kill -9 "${pids[2]}"; fi
  t_fault=$(now)
  committed=$(newest_commit)
  if [[ $how == replace ]]; then
    await "$log0" "waiting up to"
    node_cmd 4 "$epochs"
    "${cmd[@]}" --join "127.0.0.1:$port" "${all_nodes[@]}" >"$work/$scenario-4.log" 2>&1 &
    pids+=($!)
  fi
  await "$log0" "lost node"
  t_detected=$(now)
  until_true "$log0 training again" trained_again "$log0"
  t_recovered=$(now)
  if [[ $scenario == *stop* ]]; then
    sleep "$(echo "10 - ($(now) - $t_fault)" | bc | sed 's/^-.*/0/')"
    kill -CONT "${pids[2]}"
  fi
  wait_all
  all_nodes=()
  back_to=$(grep -o 'rolls back to step [0-9]*' "$log0" | head -1 | tr -dc 0-9)
  row "$scenario" "$(secs "$t_detected" "$t_fault")" "$(secs "$t_recovered" "$t_detected")" \
    "$(grep -o '[0-9]* steps done since' "$log0" | head -1 | cut -d' ' -f1)" \
    "$(final_test "$log0")" "$([[ $back_to -ge $committed ]] && echo 0 || echo 1)" "$(left)" \
    "$(refused "$log0")"
done

for scenario in kill-node0 crash-node2; do
  want "$scenario" || continue
  rm -rf "$work"/ck-*
  if [[ $scenario == kill-node0 ]]; then
    start "$scenario" "$epochs"
    await "$work/$scenario-0.log" "^epoch *$kill_at "
    kill -9 "${pids[0]}"
    t_fault=$(now)
    seen=$(last_epoch "$work/$scenario-0.log")
  else
    start "$scenario" "$epochs" --crash-after-step "$kill_at"
    await "$work/$scenario-2.log" "crashing before step"
    t_fault=$(now)
    seen=$((kill_at + 1))
  fi
  # Detected: the last surviving process has stopped (each names the cause in its log).
  wait_all
  t_detected=$(now)
  committed=$(grep -h '^next_step' "$work"/ck-0/part-*/COMMIT | cut -d' ' -f2 | sort -n | tail -1)
  start "$scenario-again" "$epochs"
  await "$work/$scenario-again-0.log" "resuming at step"
  await "$work/$scenario-again-0.log" "^epoch"
  t_training=$(now)
  wait_all
  acc=$(final_test "$work/$scenario-again-0.log")
  # One step an epoch here: the steps redone are those after the commit that had run.
  redone=$((seen > committed ? seen - committed : 0))
  # A commit lost: the resumed run started before the last commit any node had written.
  newest=$(grep -h '^next_step' "$work"/ck-*/part-*/COMMIT 2>/dev/null | cut -d' ' -f2 | sort -n | tail -1)
  row "$scenario" "$(printf %.2f "$(echo "$t_detected - $t_fault" | bc)")" \
    "$(printf %.2f "$(echo "$t_training - $t_detected" | bc)")" "$redone" "$acc" \
    "$([[ $newest -ge $committed ]] && echo 0 || echo 1)" "$(left)" \
    "$(refused "$work/$scenario-again-0.log")"
done
# No single point of failure: the survivors go on by themselves. Detected: from the fault until
# the node that goes on logs it (node 1 for a lost node 0, node 0 otherwise); serving: until the
# new view is served ("took over in" / "recovered in"); training again: its next epoch line.
failover_row() {  # scenario detected serving training redone accuracy lost left ends
  printf '%-14s %8s %8s %8s %6s %9s %5s %5s %5s\n' "$@"
  printf '{"scenario":"%s","detected_s":"%s","serving_s":"%s","training_again_s":"%s","steps_redone":"%s","test_acc":"%s","commits_lost":"%s","processes_left":"%s","completions":"%s"}\n' "$@" >>"$work/json"
}
header_done=
for scenario in failover-kill0 failover-stop0 adopt-two failover-two; do
  want "$scenario" || continue
  if [[ -z $header_done ]]; then
    printf '%-14s %8s %8s %8s %6s %9s %5s %5s %5s\n' scenario detected serving training redone \
      test_acc lost left ends
    header_done=1
  fi
  rm -rf "$work"/ck-*
  # shellcheck disable=SC2206
  all_nodes=(--recover adopt $heartbeat)
  start "$scenario" "$epochs"
  await "$work/$scenario-0.log" "^epoch *$kill_at "
  seen=$(last_epoch "$work/$scenario-0.log")
  committed=$(newest_commit)
  case $scenario in
    failover-kill0) kill -9 "${pids[0]}" ;;
    failover-stop0) kill -STOP "${pids[0]}" ;;
    adopt-two) kill -9 "${pids[1]}"; sleep 0.05; kill -9 "${pids[2]}" ;;
    failover-two) kill -9 "${pids[0]}"; sleep 0.05; kill -9 "${pids[3]}" ;;
  esac
  t_fault=$(now)
  heir=$work/$scenario-1.log
  [[ $scenario == adopt-two ]] && heir=$work/$scenario-0.log
  await "$heir" "lost the coordinator|lost node"
  t_detected=$(now)
  await "$heir" "took over in|recovered in"
  t_serving=$(now)
  until_true "$heir training again" trained_again "$heir"
  t_training=$(now)
  if [[ $scenario == failover-stop0 ]]; then
    sleep "$(echo "10 - ($(now) - $t_fault)" | bc | sed 's/^-.*/0/')"
    kill -CONT "${pids[0]}"
  fi
  wait_all
  all_nodes=()
  back_to=$(grep -o 'rolls back to step [0-9]*' "$heir" | head -1 | tr -dc 0-9)
  ends=$(grep -l '"node_summary":true' "$work/$scenario"-*.log | wc -l)
  failover_row "$scenario" "$(secs "$t_detected" "$t_fault")" "$(secs "$t_serving" "$t_detected")" \
    "$(secs "$t_training" "$t_serving")" "$((seen > back_to ? seen - back_to : 0))" \
    "$(final_test "$heir")" "$([[ $back_to -ge $committed ]] && echo 0 || echo 1)" "$(left)" "$ends"
  grep -h "not a majority" "$work/$scenario"-*.log >&2 || true
done
cat "$work/json"

# The fault timeline (PLOT=FILE.png, default none): one bar per fault, from the fault to
# detected, to the new view served (failover rows; the others count it in "training again"), to
# training again. Restart rows (kill-node0, crash-node2) are drawn too: their "detected" is the
# last process stopped, and "training again" the restarted run's first epoch.
if [[ -n ${PLOT:-} ]]; then
  # shellcheck source=scripts/plot_helpers.sh
  source scripts/plot_helpers.sh
  python3 - "$work/json" "$work/timeline.dat" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
with open(sys.argv[2], "w") as out:
    for r in rows:
        if r.get("detected_s", "-") == "-":
            continue
        num = lambda k: float(r[k]) if r.get(k, "-") not in ("-", "") else 0.0
        out.write(f'"{r["scenario"]}" {num("detected_s")} {num("serving_s")} '
                  f'{num("training_again_s")}\n')
PY
  if need_gnuplot && [[ -s $work/timeline.dat ]]; then
    gnuplot <<GP
set terminal $(gnuplot_term) size 1100,550
set output "$PLOT"
set title "From the fault to training again, 4 node processes, $(basename "$dataset"), heartbeat: $heartbeat"
set ylabel "seconds after the fault"
set style data histogram
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.6
set xtics rotate by -25 noenhanced
set key top left
set grid ytics
plot "$work/timeline.dat" using 2:xtic(1) title "detected", "" using 3 title "new view served", \
     "" using 4 title "training again"
GP
    echo "plot: $PLOT" >&2
  fi
fi
