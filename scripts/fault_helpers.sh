# Shell helpers shared by scripts/recovery_runs.sh and scripts/fault_runs.sh (sourced; they set
# $work and the array pids before calling these).
wait_all() { for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done; }
now() { date +%s.%N; }
secs() { printf %.2f "$(echo "$1 - $2" | bc)"; }
final_test() { grep -o 'test [0-9][0-9.]*' "$1" | tail -1 | cut -d' ' -f2; }
# Training again: the coordinator's first epoch line after it recovered or took over (the history
# rebuilt).
trained_again() { awk '/recovered in|took over in/ { r = 1 } r && /^epoch/ { f = 1 } END { exit !f }' "$1"; }
left() { pgrep -f "$work/parts" | wc -l; }
# until_true WHAT CMD...: until CMD succeeds; gives up, naming WHAT, after 15 minutes.
until_true() {
  local what=$1 t=0
  shift
  until "$@"; do
    sleep 0.02
    t=$((t + 1))
    ((t < 45000)) || { echo "$(basename "$0"): $what: not after 15 minutes" >&2; exit 1; }
  done
}
