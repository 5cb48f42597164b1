#!/usr/bin/env bash
# ZeRO-3 against ZeRO-1 at d = 2 on gpt2-small (issue 31's target: ZeRO-3 within 15% of
# ZeRO-1's time per iteration, its all-gathers hidden under compute). Two ranks of one thread
# each, bf16, sequence 256, micro-batch 1, global batch 4 (2 micro-batches per replica);
# ZeRO-1 with --overlap-grad-reduce --overlap-param-gather, ZeRO-3 with --overlap-grad-reduce
# (its unit gathers always overlap: the next unit's starts before the current one computes).
# The two runs alternate, ROUNDS times, so a slow minute of the shared machine hits both; per
# run the median of the iterations after the first. Prints each strategy's medians, the
# ratio ZeRO-3 / ZeRO-1 of their medians, and ZeRO-3's report of its gathers: how many per
# iteration, how many no prefetch had started, and how long the passes waited for them.
#   bench/zero3_overlap.sh          (ROUNDS=3 ITERS=5; about 4 minutes here)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-5}
TRIDENT=${TRIDENT:-build/trident}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
COMMON="--model-preset gpt2-small --mock-data --seq-length 256 --micro-batch-size 1 --global-batch-size 4
  --bf16 --threads 1 --eval-iters 0 --log-interval 1 --train-iters $ITERS --overlap-grad-reduce"
declare -A FLAGS=([zero1]="--data-parallel-sharding-strategy optim --overlap-param-gather"
                  [zero3]="--data-parallel-sharding-strategy optim_grads_params")
for ((r = 0; r < ROUNDS; ++r)); do
  for s in zero1 zero3; do
    mpirun --oversubscribe -np 2 "$TRIDENT" train $COMMON ${FLAGS[$s]} > "$work/log" 2>&1 ||
      { tail -20 "$work/log" >&2; exit 1; }
    grep -E "iteration +[0-9]+/" "$work/log" | grep -vE "iteration +1/" |
      sed 's/.*per iteration (ms): \([0-9.]*\).*/\1/' | sort -n |
      awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}' >> "$work/$s"
    [[ $s == zero3 ]] && grep -o "ZeRO-3: .*" "$work/log" >> "$work/gathers"
  done
done
/usr/bin/python3 - "$work" <<'PY'
import statistics, sys
work = sys.argv[1]
runs = {s: [float(x) for x in open(f"{work}/{s}")] for s in ("zero1", "zero3")}
for s, ms in runs.items():
    print(f"{s}: median ms/iteration per run {', '.join(f'{m:.0f}' for m in ms)}")
ratio = statistics.median(runs["zero3"]) / statistics.median(runs["zero1"])
print(f"ZeRO-3 / ZeRO-1 time per iteration: {ratio:.2f} (target <= 1.15)")
for line in open(f"{work}/gathers"):
    print("  " + line.strip())
PY
