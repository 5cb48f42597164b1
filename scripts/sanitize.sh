#!/usr/bin/env bash
# The tests under sanitizers: `scripts/sanitize.sh address,undefined` builds build-asan/ with
# AddressSanitizer + UndefinedBehaviorSanitizer and runs the GoogleTest cases (CTest label
# "unit"; the Python reference and MPI parity runs are left out for time);
# `scripts/sanitize.sh thread` builds build-tsan/ with ThreadSanitizer and runs the tests of
# the threaded code (preprocess workers). Any sanitizer report fails its test: the process
# stops at the first one, and the tests under tests/cli/ (cli_test_util.h's run) fail on a
# report in a `trident` subprocess's output even where the exit code is not checked. Extra arguments go to ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

MODE=${1:-address,undefined}
(($#)) && shift
case "$MODE" in
  address,undefined | undefined,address) BUILD=build-asan ;;
  thread) BUILD=build-tsan ;;
  *) echo "usage: scripts/sanitize.sh [address,undefined|thread] [ctest arguments]" >&2; exit 2 ;;
esac

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTRIDENT_SANITIZE="$MODE" \
  -DTRIDENT_BENCH=OFF > /dev/null
cmake --build "$BUILD" -j "$(nproc)"

# The tests' scratch folders (and MPI's session folders) go to a folder of this run, apart
# from those of a normal build's tests running beside it.
TMPDIR=$(mktemp -d)
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
SUPP=$ROOT/scripts/sanitizers
# Two test processes at a time, each with OpenMP threads, on a machine that may be shared:
# libgomp's spinning waits then hold the cores the working threads need, and with the
# slower instrumented code between parallel regions a training step took 20-100x longer
# than with threads that sleep while they wait.
export OMP_WAIT_POLICY=passive

if [[ $MODE == thread ]]; then
  # libgomp is not built with TSan, so its barriers are invisible to it and every OpenMP
  # region would be reported as a race. One OpenMP thread keeps libgomp from starting any;
  # the code under test here (preprocess) runs its own std::threads.
  export OMP_NUM_THREADS=1
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
  # Threaded code and its tests (add the curation workers here): preprocess's workers, and
  # trident serve's engine loop with the handler threads that wait on its jobs; the training
  # heartbeat.
  TESTS='^(Preprocess|PreprocessCommand|ServeEngine|Heartbeat)\.'
  ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" -R "$TESTS" "$@"
else
  export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:fast_unwind_on_malloc=0:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
  export LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0"
  ctest --test-dir "$BUILD" --output-on-failure -j "$(nproc)" -L unit "$@"
fi

