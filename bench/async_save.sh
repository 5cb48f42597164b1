#!/usr/bin/env bash
# --async-save against synchronous saves: 8 iterations with 4 saves (--save-interval 2) of a
# 33M-parameter model whose save (~400 MB: weights and two Adam moments, xxh64, fsync) takes
# longer than a step, one process, --threads 1 (the writer thread has the other core). Rounds
# interleave the two modes; prints each run's wall time (process start to exit) and the same
# less the start-up before step 1 (allocation, initialisation: alike in both modes), the step
# and save times from the synchronous log, and the median async/sync ratios of both (issue
# 33's target: <= 0.75). Only ratios within one run of this script compare.
#
# Measured 2026-11-26 on the shared 2-vCPU development machine (load 7-12 from other builds
# and tests, CPU pressure ~90%), nice -n -10, 5 rounds: step 478-522 ms. Where the
# synchronous save was disk-bound and longer than a step (1.07 s), async/sync 0.765 (0.759
# after start-up); where the page cache absorbed it (0.37-0.49 s, shorter than a step),
# 1.05-1.21: the background write then competes with the memory-bound step for the two
# vCPUs and memory bandwidth (steps 480 -> 700-900 ms while it runs, the write 3x slower
# than alone). Median 1.12. An earlier run at --seq-length 64 (step ~750 ms, disk-bound saves
# of ~1.0 s): 8.57 s async against 10.55 s sync, 0.81. The 0.75 target was not met here.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
out=$(mktemp -d -p "${TMPDIR:-/tmp}")
trap 'rm -rf "$out"' EXIT
ROUNDS=${ROUNDS:-5}
ARGS="train --mock-data --num-layers 2 --hidden-size 1024 --num-attention-heads 16
      --seq-length 32 --vocab-size 8192 --micro-batch-size 1 --global-batch-size 4
      --train-iters 8 --save-interval 2 --eval-iters 0 --log-interval 1 --peak-tflops 1
      --threads 1 --no-memory-check"
wall() {  # seconds one run takes, start to exit
  local start end
  start=$(date +%s.%N)
  build/trident $ARGS "$@" > "$out/log.txt"
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}
startup() {  # the start-up before step 1, from the last run's log
  grep -o "total [0-9.]* s before step 1" "$out/log.txt" | awk '{print $2}'
}
median() { sort -n | awk '{r[NR] = $1} END {print r[int((NR + 1) / 2)]}'; }
ratios=()
loop_ratios=()
for round in $(seq "$ROUNDS"); do
  rm -rf "$out/sync" "$out/async"
  s=$(wall --save "$out/sync" --metrics-file "$out/sync.jsonl")
  s_loop=$(echo "$s - $(startup)" | bc)
  step_ms=$(mean_ms "$out/sync.jsonl")
  save_s=$(grep -o "MB in [0-9.e-]* s" "$out/log.txt" | awk '{s += $3} END {print s / NR}')
  a=$(wall --save "$out/async" --async-save --metrics-file "$out/async.jsonl")
  a_loop=$(echo "$a - $(startup)" | bc)
  blocked=$(grep -o "the step was blocked [0-9.]* s:" "$out/log.txt" | awk '{s += $5} END {print s / NR}')
  ratio=$(echo "scale=3; $a / $s" | bc)
  loop_ratio=$(echo "scale=3; $a_loop / $s_loop" | bc)
  ratios+=("$ratio")
  loop_ratios+=("$loop_ratio")
  printf 'round %d: sync %.2f s (%.2f after start-up; step %.0f ms, save %.2f s each), ' \
    "$round" "$s" "$s_loop" "$step_ms" "$save_s"
  printf 'async %.2f s (%.2f; step blocked %.3f s per save): async/sync %s (%s after start-up)\n' \
    "$a" "$a_loop" "$blocked" "$ratio" "$loop_ratio"
done
echo "median async/sync: $(printf '%s\n' "${ratios[@]}" | median) wall," \
     "$(printf '%s\n' "${loop_ratios[@]}" | median) after start-up"
