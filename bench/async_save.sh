#!/usr/bin/env bash
# --async-save against synchronous saves: 8 iterations with 4 saves (--save-interval 2) of a
# 33M-parameter model whose save (~400 MB: weights and two Adam moments, xxh64, fsync) takes
# longer than a step, one process, --threads 1 (the writer thread has the other core). Rounds
# interleave the two modes; prints each run's wall time, the step and save times from the
# synchronous log, and the median async/sync ratio (issue 33's target: <= 0.75).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
out=$(mktemp -d -p "${TMPDIR:-/tmp}")
trap 'rm -rf "$out"' EXIT
ROUNDS=${ROUNDS:-3}
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
ratios=()
for round in $(seq "$ROUNDS"); do
  rm -rf "$out/sync" "$out/async"
  s=$(wall --save "$out/sync" --metrics-file "$out/sync.jsonl")
  step_ms=$(mean_ms "$out/sync.jsonl")
  save_s=$(grep -o "MB in [0-9.e-]* s" "$out/log.txt" | awk '{s += $3} END {print s / NR}')
  a=$(wall --save "$out/async" --async-save --metrics-file "$out/async.jsonl")
  blocked=$(grep -o "the step was blocked [0-9.]* s:" "$out/log.txt" | awk '{s += $5} END {print s / NR}')
  ratio=$(echo "scale=3; $a / $s" | bc)
  ratios+=("$ratio")
  echo "round $round: sync ${s} s (step ${step_ms} ms, save ${save_s} s each), async ${a} s" \
       "(step blocked ${blocked} s per save): async/sync ${ratio}"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{r[NR] = $1} END {print "median async/sync: " r[int((NR + 1) / 2)]}'
