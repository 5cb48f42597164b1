#!/usr/bin/env bash
# Checkpoints sharded over data parallelism: a 70M-parameter model (840 MB of weights and two
# Adam moments) at d = 2 with the distributed optimizer, one thread per rank. Per binary (this
# build, and BASELINE=path/to/trident for one to compare, e.g. a build of a commit before the
# sharded save, which all-gathers the moments and writes each file from data-parallel rank 0):
# the synchronous save's time as logged, rank 0's peak RSS without a save and with one, and
# with --async-save the snapshot each rank copies into.
#
# Usage: bash bench/sharded_checkpoint.sh   (BASELINE=... to compare)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
out=$(mktemp -d -p "${TMPDIR:-/var/tmp}")
trap 'rm -rf "$out"' EXIT
ARGS="train --mock-data --num-layers 2 --hidden-size 1536 --num-attention-heads 16
      --seq-length 64 --vocab-size 8192 --micro-batch-size 1 --global-batch-size 2
      --train-iters 2 --lr-warmup-iters 0 --eval-iters 0 --log-interval 1 --peak-tflops 1
      --threads 1 --use-distributed-optimizer"
measure() {  # binary label
  local bin=$1 label=$2
  rm -rf "$out/ckpt" "$out/async"
  local none with async
  none=$(mpirun --oversubscribe -np 2 "$bin" $ARGS | grep -o "^peak RSS [0-9.]* [KMG]iB")
  with=$(mpirun --oversubscribe -np 2 "$bin" $ARGS --save "$out/ckpt")
  async=$(mpirun --oversubscribe -np 2 "$bin" $ARGS --save "$out/async" --async-save)
  echo "$label:"
  echo "  without a save:   $none"
  echo "  synchronous save: $(echo "$with" | grep -o "^peak RSS [0-9.]* [KMG]iB"); $(echo "$with" |
    grep -o "saved checkpoint .*")"
  echo "  --async-save:     $(echo "$async" | grep -o "^peak RSS [0-9.]* [KMG]iB"); $(echo "$async" |
    grep -o "[0-9.]* MB to copy")"
  echo "                    $(echo "$async" | grep -o "saved checkpoint .*")"
}
measure build/trident "this build (every data-parallel rank writes its shard)"
if [ -n "${BASELINE:-}" ]; then
  measure "$BASELINE" "baseline $BASELINE"
fi
