#!/usr/bin/env bash
# Fault injection around the program (issue 12), as root: 4 degnn node processes, each in its own
# network namespace behind one bridge, train Pubmed (decentralized, 3 layers, --recover adopt)
# while a scenario cuts a node off, drops packets (nftables), pauses or kills a node. Everything
# it makes (namespaces, nftables tables, processes, files) it removes, also on Ctrl-C.
#   scripts/fault_runs.sh [EPOCHS] [SCENARIO_FILE...]   (default: 40, scripts/faults/*.scenario)
# A scenario file holds one fault per line ("#" starts a comment):
#   WHEN ACTION TARGET [PERCENT] [for SECONDS]
#   WHEN    epoch=N (once node 0 logged epoch N) or second=T (T s after node 0's first epoch)
#   ACTION  kill (SIGKILL) | stop (SIGSTOP, undone with SIGCONT) | cut (every packet in and out
#           dropped) | loss (PERCENT of the packets dropped, each way)
#   TARGET  a rank 0..3, or all
#   for S   undo after S seconds (stop, cut, loss; at the run's end otherwise)
# Prints one row per scenario (detected after, training again after (node 0's next epoch line,
# the history rebuilt), steps redone, final test
# accuracy, slowest epoch, commits lost, processes left) and a JSON line each, after a fault-free
# reference run in the same namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/fault_helpers.sh
source scripts/fault_helpers.sh
[[ $(id -u) == 0 ]] || { echo "fault_runs.sh: run as root (it makes network namespaces)" >&2; exit 1; }
command -v ip >/dev/null || { echo "fault_runs.sh: needs iproute2 (ip)" >&2; exit 1; }
if ! command -v nft >/dev/null; then
  echo "fault_runs.sh: installing nftables" >&2
  apt-get install -y -qq nftables >/dev/null || { apt-get update -qq && apt-get install -y -qq nftables >/dev/null; }
fi
epochs=${1:-40}
shift || true
scenarios=("$@")
[[ ${#scenarios[@]} -gt 0 ]] || scenarios=(scripts/faults/*.scenario)
degnn=${DEGNN_BINARY:-$PWD/${DEGNN_BUILD_DIR:-build}/runtime/degnn}
[[ -x $degnn ]] || { echo "fault_runs.sh: build first (scripts/build.sh)" >&2; exit 1; }
work=$(mktemp -d)
net=degf$$
pids=()
undo=()     # commands that undo the faults in force
pending=()  # background undos still sleeping

ns() { echo "$net-$1"; }
addr() { echo "198.18.0.$(($1 + 1))"; }
cleanup() {
  for p in "${pending[@]}"; do kill "$p" 2>/dev/null || true; done
  for u in "${undo[@]}"; do eval "$u" 2>/dev/null || true; done
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
  for k in 0 1 2 3; do
    ip netns pids "$(ns "$k")" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$(ns "$k")" 2>/dev/null || true
  done
  ip netns del "$net-sw" 2>/dev/null || true
  [[ -n ${KEEP:-} ]] || rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# -- the network: a bridge in its own namespace, node K at 198.18.0.K+1 behind a veth pair --
ip netns add "$net-sw"
ip -n "$net-sw" link add br0 type bridge
ip -n "$net-sw" link set br0 up
for k in 0 1 2 3; do
  ip netns add "$(ns "$k")"
  ip -n "$net-sw" link add "v${k}a" type veth peer name "v${k}b" netns "$(ns "$k")"
  ip -n "$net-sw" link set "v${k}a" master br0 up
  ip -n "$(ns "$k")" link set lo up
  ip -n "$(ns "$k")" addr add "$(addr "$k")/24" dev "v${k}b"
  ip -n "$(ns "$k")" link set "v${k}b" up
done

"$degnn" partition --data data/pubmed --parts 4 --method metis --out "$work/parts" >/dev/null

# start NAME: the 4 nodes in their namespaces, node K logging to NAME-K.log
start() {
  pids=()
  for k in 0 1 2 3; do
    local role=(--join "$(addr 0):24800" --listen "$(addr "$k"):0" --rank-hint "$k")
    [[ $k == 0 ]] && role=(--is-seed --listen "$(addr 0):24800" --nodes 4)
    ip netns exec "$(ns "$k")" "$degnn" node --partitions "$work/parts" --insecure \
      --pipeline decentralized --layers 3 --fanouts 10,10,10 --epochs "$epochs" --eval-every 5 \
      --seed 1 --no-progress --threads 1 --checkpoint-dir "$work/$1-ck-$k" --recover adopt \
      --heartbeat-ms 250 --heartbeat-misses 12 --name "node-$k" "${role[@]}" \
      >"$work/$1-$k.log" 2>&1 &
    pids+=($!)
  done
}
slowest() { grep -o '^epoch.*time [0-9.]*s' "$1" | grep -o '[0-9.]*s$' | tr -d s | sort -n | tail -1; }
newest_commit() { grep -h '^next_step' "$work/$1"-ck-*/part-*/COMMIT 2>/dev/null | cut -d' ' -f2 | sort -n | tail -1; }

# do_fault ACTION RANK PERCENT: applies it now; appends its undo to `undo`
table=degnn_fault
do_fault() {
  local action=$1 rank=$2 pct=$3 n
  n=$(ns "$rank")
  case $action in
    kill) kill -9 "${pids[$rank]}" ;;
    stop)
      kill -STOP "${pids[$rank]}"
      undo+=("kill -CONT ${pids[$rank]}")
      ;;
    cut | loss)
      local match=""
      [[ $action == loss ]] && match="numgen random mod 100 < $pct"
      ip netns exec "$n" nft add table inet "$table"
      ip netns exec "$n" nft add chain inet "$table" in '{ type filter hook input priority 0; }'
      ip netns exec "$n" nft add chain inet "$table" out '{ type filter hook output priority 0; }'
      ip netns exec "$n" nft add rule inet "$table" in iifname != lo $match drop
      ip netns exec "$n" nft add rule inet "$table" out oifname != lo $match drop
      undo+=("ip netns exec $n nft delete table inet $table")
      ;;
    *) echo "fault_runs.sh: unknown action $action" >&2; return 1 ;;
  esac
}

row() {
  printf '%-22s %9s %9s %6s %9s %8s %5s %5s\n' "$@"
  printf '{"scenario":"%s","detected_s":"%s","training_again_s":"%s","steps_redone":"%s","test_acc":"%s","slowest_epoch_s":"%s","commits_lost":"%s","processes_left":"%s"}\n' "$@" >>"$work/json"
}
printf '%-22s %9s %9s %6s %9s %8s %5s %5s\n' scenario detected recovered redone test_acc slowest lost left

start none
wait_all
row none - - 0 "$(final_test "$work/none-0.log")" "$(slowest "$work/none-0.log")" 0 "$(left)"

for file in "${scenarios[@]}"; do
  name=$(basename "$file" .scenario)
  mapfile -t faults < <(grep -v '^\s*#' "$file" | grep -v '^\s*$')
  start "$name"
  log0=$work/$name-0.log
  until grep -q "^epoch" "$log0" || ! kill -0 "${pids[0]}" 2>/dev/null; do sleep 0.02; done
  t_start=$(now)
  t_fault="" committed=0 pending=()
  for f in "${faults[@]}"; do
    read -r when action target rest <<<"$f"
    pct=0
    [[ $action == loss ]] && { read -r pct rest <<<"$rest"; }
    dur=""
    [[ $rest =~ for\ ([0-9.]+) ]] && dur=${BASH_REMATCH[1]}
    case $when in
      epoch=*) until grep -q "^epoch *${when#epoch=} " "$log0" || ! kill -0 "${pids[0]}" 2>/dev/null; do sleep 0.02; done ;;
      second=*) sleep "$(echo "${when#second=} - ($(now) - $t_start)" | bc | sed 's/^-.*/0/')" ;;
      *) echo "fault_runs.sh: $file: WHEN is epoch=N or second=T, not '$when'" >&2; exit 1 ;;
    esac
    [[ -n $t_fault ]] || { t_fault=$(now); committed=$(newest_commit "$name"); }
    ranks=("$target")
    [[ $target == all ]] && ranks=(0 1 2 3)
    first_undo=${#undo[@]}
    for r in "${ranks[@]}"; do do_fault "$action" "$r" "$pct"; done
    if [[ -n $dur ]]; then
      # Undo these after dur seconds, in the background of this script.
      ( sleep "$dur"; for u in "${undo[@]:$first_undo}"; do eval "$u" 2>/dev/null || true; done ) &
      pending+=($!)
    fi
  done
  t_detected="" t_recovered=""
  while kill -0 "${pids[0]}" 2>/dev/null; do
    [[ -z $t_detected ]] && grep -q "lost node" "$log0" && t_detected=$(now)
    # Training again: node 0's first epoch after it recovered (the history rebuilt).
    [[ -z $t_recovered ]] && trained_again "$log0" && t_recovered=$(now)
    sleep 0.05
  done
  for p in "${pending[@]}"; do wait "$p" 2>/dev/null || true; done
  for u in "${undo[@]}"; do eval "$u" 2>/dev/null || true; done
  undo=()
  wait_all
  back_to=$(grep -o 'rolls back to step [0-9]*' "$log0" | head -1 | tr -dc 0-9 || true)
  row "$name" "$([[ -n $t_detected ]] && secs "$t_detected" "$t_fault" || echo -)" \
    "$([[ -n $t_recovered ]] && secs "$t_recovered" "$t_detected" || echo -)" \
    "$(grep -o '[0-9]* steps done since' "$log0" | head -1 | cut -d' ' -f1 || echo 0)" \
    "$(final_test "$log0")" "$(slowest "$log0")" \
    "$([[ -z $back_to || $back_to -ge $committed ]] && echo 0 || echo 1)" "$(left)"
  grep -h "error" "$work/$name"-*.log | head -3 >&2 || true
done
cat "$work/json"
