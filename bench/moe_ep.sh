#!/usr/bin/env bash
# Expert parallelism (issue 32, step 5) against EP = 1 at the same d = 2 (mpirun -np 2, one
# thread per rank): an 8-expert top-2 model (4 layers, all MoE, h 256, expert width 512,
# seq 256, micro-batch 2, global batch 8), 12 iterations, ms/iteration after the first, and
# the expert group's all-to-all (calls, MiB and ms per iteration on rank 0) from the
# collectives summary. Rounds interleave the two modes; only ratios within one run compare.
# At EP = 2 each rank runs 4 of the 8 experts on its and its peer's rows; every rank still
# holds all 8 experts' weights (README, "Expert parallelism"), so the memory is the same.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
export OMPI_MCA_btl_vader_single_copy_mechanism=none
out=$(mktemp -d -p "${TMPDIR:-/var/tmp}")
trap 'rm -rf "$out"' EXIT
ROUNDS=${ROUNDS:-3}
ARGS="train --mock-data --num-layers 4 --hidden-size 256 --num-attention-heads 8
      --seq-length 256 --vocab-size 4096 --micro-batch-size 2 --global-batch-size 8
      --num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 512 --moe-aux-loss-coeff 0.01
      --train-iters 12 --eval-iters 0 --log-interval 1 --peak-tflops 1 --threads 1"
for round in $(seq "$ROUNDS"); do
  for ep in 1 2; do
    mpirun --oversubscribe -np 2 build/trident $ARGS --expert-model-parallel-size "$ep" \
      --metrics-file "$out/ep$ep.jsonl" > "$out/ep$ep.log"
    a2a=$(grep -E "^ +expert +all-to-all" "$out/ep$ep.log" | awk '{print $3, $4, $5}')
    echo "round $round EP $ep: $(mean_ms "$out/ep$ep.jsonl") ms/iteration;" \
      "expert all-to-all (calls, MiB, ms per iteration): ${a2a:-none}"
    rm -f "$out/ep$ep.jsonl"
  done
done
