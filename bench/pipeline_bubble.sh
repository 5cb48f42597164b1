#!/usr/bin/env bash
# Measured pipeline bubble against the analytic one: a synthetic stage (sleeps of 20 ms
# forward, 40 ms backward per micro-batch and stage; zb-h1 splits the backward into 20 ms B
# and 20 ms W) through the real executor and MPI, for p = 2 and 4; then the real model.
# 1F1B, interleaved (v = 2) and ZB-H1 run side by side at each (p, m): ZB-H1's bubble should
# be about a third of 1F1B's, (p - 1)(tf + tb - tw) against (p - 1)(tf + tb + tw).
#   bench/pipeline_bubble.sh [quick]   (quick: m = 2p only, real model 2 steps)
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
quick=${1:-}
bubble=build/bench/bench_pipeline_bubble
for p in 2 4; do
  ms="$p $((2 * p)) $((4 * p)) $((8 * p))"
  [[ -n $quick ]] && ms=$((2 * p))
  for m in $ms; do
    mpirun --oversubscribe -np $p $bubble 1 $m 20 40 1f1b
    mpirun --oversubscribe -np $p $bubble 2 $m 20 40 interleaved
    mpirun --oversubscribe -np $p $bubble 1 $m 20 40 zb-h1 20
  done
done
iters=3
[[ -n $quick ]] && iters=2
echo "real model (12 layers, h=256, b=1, s=128), p ranks x 1 thread, m = 2p:"
for p in 2 4; do
  m=$((2 * p))
  for schedule in 1f1b interleaved zb-h1; do
    extra="--pipeline-schedule $schedule"
    [[ $schedule == interleaved ]] && extra="$extra --num-layers-per-virtual-pipeline-stage $((12 / (2 * p)))"
    echo -n "  p=$p m=$m $schedule: "
    mpirun --oversubscribe -np $p build/trident train --mock-data --num-layers 12 --hidden-size 256 \
      --num-attention-heads 4 --seq-length 128 --vocab-size 1024 --micro-batch-size 1 \
      --global-batch-size $m --train-iters $iters --log-interval $iters --eval-iters 0 \
      --peak-tflops 1 --threads 1 --pipeline-model-parallel-size $p $extra |
      grep "pipeline bubble" | sed 's/.*per stage: //'
  done
done
