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
rounds=3
[[ -n $quick ]] && iters=2 rounds=1
# The real model: the bubble of the last iteration per stage, the pipeline's (its busiest
# stage's: the last, which also runs the output layer), measured on the wall clock and
# replayed on the simulator at the run's op CPU times. At p = 4 the 4 ranks share 2 cores,
# so only the replayed figure measures the schedule there; at p = 2 the two agree.
# Two models: 12 layers of h = 256, and 8 layers of h = 512, where the products are more of
# each op (tf, tb, tw closer: the bubble ratio is (tf + tb - tw) / (tf + tb + tw)).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for model in "12 256 4" "8 512 8"; do
read -r layers hidden heads <<< "$model"
echo "real model ($layers layers, h=$hidden, b=1, s=128), p ranks x 1 thread, m = 2p, median of $rounds runs:"
rm -f "$work"/p*
for p in 2 4; do
  m=$((2 * p))
  for ((r = 0; r < rounds; ++r)); do
    for schedule in 1f1b interleaved zb-h1; do
      extra="--pipeline-schedule $schedule"
      [[ $schedule == interleaved ]] && extra="$extra --num-layers-per-virtual-pipeline-stage $((layers / (2 * p)))"
      mpirun --oversubscribe -np $p build/trident train --mock-data --num-layers $layers --hidden-size $hidden \
        --num-attention-heads $heads --seq-length 128 --vocab-size 1024 --micro-batch-size 1 \
        --global-batch-size $m --train-iters $iters --log-interval $iters --eval-iters 0 \
        --peak-tflops 1 --threads 1 --pipeline-model-parallel-size $p $extra > "$work/log"
      grep -A1 "pipeline bubble" "$work/log" | sed 's/.*stage: //; s/.*core): //; s/;.*) / | /' |
        paste -sd'|' >> "$work/p$p.$schedule"
    done
  done
  /usr/bin/python3 - "$work" "$p" "$m" <<'PY'
import statistics, sys
work, p, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = {}
for s in ("1f1b", "interleaved", "zb-h1"):
    runs = [[field.split() for field in line.strip().split("|")] for line in open(f"{work}/p{p}.{s}")]
    # fields: measured per stage, measured pipeline, replayed per stage, replayed pipeline
    rows[s] = {k: statistics.median(float(run[i][0]) for run in runs) for k, i in (("measured", 1), ("replayed", 3))}
    stages = [statistics.median(float(run[0][j]) for run in runs) for j in range(p)]
    replay = [statistics.median(float(run[2][j]) for run in runs) for j in range(p)]
    print(f"  p={p} m={m} {s:<11}: per stage measured {' '.join(f'{x:.3f}' for x in stages)}, "
          f"replayed {' '.join(f'{x:.3f}' for x in replay)}; pipeline measured {rows[s]['measured']:.3f}, "
          f"replayed {rows[s]['replayed']:.3f}")
for k in ("measured", "replayed"):
    print(f"  p={p} zb-h1 / 1f1b pipeline bubble ({k}): {rows['zb-h1'][k] / rows['1f1b'][k]:.2f}")
PY
done
done
