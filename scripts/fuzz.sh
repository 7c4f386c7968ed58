#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang 14, AddressSanitizer + UndefinedBehaviorSanitizer) into
# build-fuzz/ and runs each for SECONDS (default 10), or until it made RUNS executions if that
# comes first, from its seed corpus in tests/fuzz/corpus, on a copy (new inputs stay out of the
# repo). Ends non-zero on the first crash, leak or sanitizer report; prints each target's
# executions and a JSON line.
# Usage (as root on Debian 12): scripts/fuzz.sh [SECONDS [RUNS]]
#   DEGNN_FUZZ_TARGETS="files csv" picks targets; DEGNN_FUZZ_KEEP=DIR keeps the grown corpora.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
runs_cap=${2:--1}
scripts/setup.sh
packages=(clang-14 libclang-rt-14-dev libomp-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "fuzz: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
build=${DEGNN_FUZZ_DIR:-build-fuzz}
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDEGNN_FUZZ=ON -DDEGNN_NATIVE=OFF >/dev/null
all_targets=(basp_frames http_head wire files csv arrays)
read -r -a targets <<<"${DEGNN_FUZZ_TARGETS:-${all_targets[*]}}"
cmake --build "$build" -j"${DEGNN_JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}"
# The file harnesses rewrite a file per input: on tmpfs when there is one.
if [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
if [ -n "${DEGNN_FUZZ_KEEP:-}" ]; then
  work=$DEGNN_FUZZ_KEEP
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
total=0
json=""
for t in "${targets[@]}"; do
  mkdir -p "$work/$t"
  cp tests/fuzz/corpus/"$t"/* "$work/$t/" 2>/dev/null || true
  # The file harnesses also write seeds from the current formats (kept in the repo's corpus too).
  case $t in files | csv) DEGNN_FUZZ_WRITE_SEEDS="$work/$t" "$build/tests/fuzz/fuzz_$t" >/dev/null ;; esac
  log="$work/$t.log"
  # -timeout: an input that runs 10 s is a finding (a peer's 88 bytes once cost minutes), not a hang.
  if ! "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -runs="$runs_cap" -timeout=10 -print_final_stats=1 \
       -artifact_prefix="$work/$t-" "$work/$t" >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz: $t FAILED (the input is in $work, kept)" >&2
    trap - EXIT
    exit 1
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  per_second=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$')
  echo "fuzz: $t: $runs executions ($per_second per second, at most $seconds s), no crash"
  total=$((total + runs))
  json+="${json:+,}\"$t\":$runs"
done
echo "fuzz: $total executions in all"
echo "{\"fuzz_seconds\":$seconds,\"executions\":{$json},\"total\":$total}"
