#!/usr/bin/env bash
# Two ranks as fast as one (issue 38, item 4): gpt2-small (s = 256, micro-batch MICRO = 4,
# 8 micro-batches a step: global batch 32) as 2 ranks x 1 thread against one process x 2
# threads; the parallel efficiency is one-process ms/iter over two-rank ms/iter, for t = 2,
# d = 2 (--overlap-grad-reduce; 4 micro-batches a replica) and p = 2 (m = 8) under the even
# split (--pipeline-split even), the balanced default (the output layer and loss counted: 9 +
# 3 layers) and the balanced split with ZB-H1. The runs interleave over ROUNDS (each run's
# mean ms/iter after its first iteration); the medians over the rounds are printed last.
# Run it on a quiet machine (`uptime`: load < 2.5).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-4}
MICRO=${MICRO:-4}  # micro-batch size; 8 micro-batches a step at every layout
out=$(mktemp -d)
ARGS="train --model-preset gpt2-small --seq-length 256 --mock-data --micro-batch-size $MICRO
      --global-batch-size $((8 * MICRO)) --train-iters $ITERS --log-interval 1 --eval-iters 0
      --peak-tflops 1"
P2="--pipeline-model-parallel-size 2"
NAMES=(t2 d2 p2_even p2_balanced p2_balanced_zbh1)
declare -A FLAGS=(
  [t2]="--tensor-model-parallel-size 2"
  [d2]="--overlap-grad-reduce"
  [p2_even]="$P2 --pipeline-split even"
  [p2_balanced]="$P2"
  [p2_balanced_zbh1]="$P2 --pipeline-schedule zb-h1")
for ((i = 1; i <= ROUNDS; i++)); do
  build/trident $ARGS --threads 2 --metrics-file "$out/one_$i.jsonl" > "$out/one_$i.log"
  one=$(mean_ms "$out/one_$i.jsonl")
  line="round $i: one process x 2 threads $(printf %.0f "$one") ms/iter"
  echo "$one" >> "$out/one.ms"
  for name in "${NAMES[@]}"; do
    mpirun --oversubscribe -np 2 build/trident $ARGS --threads 1 ${FLAGS[$name]} \
      --metrics-file "$out/${name}_$i.jsonl" > "$out/${name}_$i.log"
    ms=$(mean_ms "$out/${name}_$i.jsonl")
    eff=$(/usr/bin/python3 -c "print(f'{$one / $ms:.3f}')")
    echo "$eff" >> "$out/$name.eff"
    line="$line | $name $(printf %.0f "$ms") ms ($eff)"
  done
  echo "$line"
done
grep -h "pipeline split" "$out/p2_even_1.log" "$out/p2_balanced_1.log" | sed 's/^/  /'
echo "parallel efficiency (one process x 2 threads / 2 ranks x 1 thread), median of $ROUNDS rounds:"
for name in "${NAMES[@]}"; do
  /usr/bin/python3 -c "import statistics,sys; v=[float(x) for x in open(sys.argv[1])]; \
print(f'  {sys.argv[2]:18s} {statistics.median(v):.3f}  (rounds: {\" \".join(f\"{x:.3f}\" for x in v)})')" \
    "$out/$name.eff" "$name"
done
rm -rf "$out"
