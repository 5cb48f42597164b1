#!/usr/bin/env bash
# Two ranks as fast as one (issue 38, item 4): gpt2-small (s = 256, micro-batch MICRO = 4,
# 8 micro-batches a step: global batch 32) as 2 ranks x 1 thread against one process x 2
# threads; the parallel efficiency is one-process ms/iter over two-rank ms/iter, for t = 2,
# d = 2 (--overlap-grad-reduce; 4 micro-batches a replica) and p = 2 (m = 8) under the even
# split (--pipeline-split even), the balanced default (the output layer and loss counted: 9 +
# 3 layers) and the balanced split with ZB-H1. The runs interleave over ROUNDS (each run's
# mean ms/iter after its first iteration); the medians over the rounds are printed last.
# For p = 2 also the schedule's own efficiency, from training's replay of the last step at
# its ops' CPU times (a stage's busy time over the makespan, averaged over the stages): it
# leaves out how two threads share one process and what a busy machine steals. Run it on a
# quiet machine (`uptime`: load < 2.5), or give it the cores: `chrt -f 50 bash bench/two_ranks.sh`
# (real-time priority: other work waits while it runs). LAYOUTS="p2_balanced ..." runs a subset.
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
read -r -a NAMES <<< "${LAYOUTS:-t2 d2 p2_even p2_balanced p2_balanced_zbh1}"
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
    echo "  round $i: $name $(printf %.0f "$ms") ms/iter, efficiency $eff (one process $(printf %.0f "$one") ms)"
    # The schedule alone, whatever the load: each stage's idle / compute replayed at its ops'
    # CPU times; busy over makespan averaged over the stages, 1 / (1 + idle) each.
    replay=$(grep "replayed at its ops" "$out/${name}_$i.log" | sed 's/.*): \([0-9. ]*\);.*/\1/' || true)
    if [[ -n "$replay" ]]; then
      sched=$(/usr/bin/python3 -c "import sys; b=[float(x) for x in sys.argv[1:]]; \
print(f'{sum(1/(1+x) for x in b)/len(b):.3f}')" $replay)
      echo "$sched" >> "$out/$name.sched"
      line="$line [replayed idle/compute $replay: schedule $sched]"
    fi
  done
  echo "$line"
done
grep -h "pipeline split" "$out"/p2_*_1.log 2>/dev/null | sed 's/^/  /' || true
echo "p = 2, the schedule's efficiency at the ops' CPU times (load-free), median:"
for name in p2_even p2_balanced p2_balanced_zbh1; do
  [[ -f "$out/$name.sched" ]] || continue
  /usr/bin/python3 -c "import statistics,sys; v=[float(x) for x in open(sys.argv[1])]; \
print(f'  {sys.argv[2]:18s} {statistics.median(v):.3f}')" "$out/$name.sched" "$name"
done
echo "parallel efficiency (one process x 2 threads / 2 ranks x 1 thread), median of $ROUNDS rounds:"
for name in "${NAMES[@]}"; do
  /usr/bin/python3 -c "import statistics,sys; v=[float(x) for x in open(sys.argv[1])]; \
print(f'  {sys.argv[2]:18s} {statistics.median(v):.3f}  (rounds: {\" \".join(f\"{x:.3f}\" for x in v)})')" \
    "$out/$name.eff" "$name"
done
rm -rf "$out"
