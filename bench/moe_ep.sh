#!/usr/bin/env bash
# Expert parallelism (issue 32, step 5) against EP = 1 at the same d = 2 (mpirun -np 2, one
# thread per rank): an 8-expert top-2 model (4 layers, all MoE, h 256, expert width 512,
# seq 256, micro-batch 2, global batch 8), 12 iterations, ms/iteration after the first, and
# the expert group's all-to-all (calls, MiB and ms per iteration on rank 0) from the
# collectives summary. Rounds interleave the two modes; only ratios within one run compare.
# At EP = 2 each rank runs 4 of the 8 experts on its and its peer's rows; every rank still
# holds all 8 experts' weights (README, "Expert parallelism"), so the memory is the same.
#
# Measured 2026-11-26 on the 2-vCPU development machine (shared with another build), 3
# rounds: EP 1 395-457 ms/iteration, EP 2 468-495 (1.05-1.25x). Each rank does the same
# expert FLOPs either way (its T k rows, over 8 experts or over 4), so on one node EP adds
# only its exchanges: 56 all-to-alls per iteration (4 layers x 2 micro-batches x 7: counts,
# rows and weights out, rows back; in backward rows out, weights' and rows' gradients back),
# 16.1 MiB (4 row exchanges of T k h floats / 2 per layer and micro-batch, as the planner's
# T k h (EP-1)/EP), 50-69 ms in MPI including the wait for the slower peer. EP pays off once
# a rank holds only its E/EP experts (not built yet) or the experts no longer fit one rank.
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
    a2a=$({ grep -E "^ +expert +all-to-all" "$out/ep$ep.log" || true; } | awk '{print $3, $4, $5}')
    echo "round $round EP $ep: $(mean_ms "$out/ep$ep.jsonl") ms/iteration;" \
      "expert all-to-all (calls, MiB, ms per iteration): ${a2a:-none}"
    rm -f "$out/ep$ep.jsonl"
  done
done
