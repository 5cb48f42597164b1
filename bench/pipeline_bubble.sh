#!/usr/bin/env bash
# Measured pipeline bubble against (p - 1) / (v m): a synthetic stage (sleeps of 20 ms
# forward, 40 ms backward per micro-batch and stage) through the real executor and MPI,
# for p = 2 and 4, v = 1 and 2, m from p to 8p; then the real model at p = 2.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for p in 2 4; do
  for v in 1 2; do
    for m in $p $((2 * p)) $((4 * p)) $((8 * p)); do
      mpirun --oversubscribe -np $p build/bench/bench_pipeline_bubble $v $m 20 40
    done
  done
done
echo "real model (12 layers, h=256, b=1, s=128), p=2, 2 ranks x 1 thread:"
for v in 1 2; do
  for m in 2 4 8; do
    extra=""; [[ $v == 2 ]] && extra="--num-layers-per-virtual-pipeline-stage 3"
    echo -n "  v=$v m=$m: "
    mpirun --oversubscribe -np 2 build/trident train --mock-data --num-layers 12 --hidden-size 256 \
      --num-attention-heads 4 --seq-length 128 --vocab-size 1024 --micro-batch-size 1 \
      --global-batch-size $m --train-iters 3 --log-interval 3 --eval-iters 0 --peak-tflops 1 \
      --threads 1 --pipeline-model-parallel-size 2 $extra | grep "pipeline bubble" | sed 's/.*per stage: //'
  done
done
