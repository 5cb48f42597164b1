#!/usr/bin/env bash
# gpt2-small (b=4, s=256) with tensor parallelism t=2 as 2 ranks x 1 thread against t=1 as
# 1 rank x 2 threads, same global batch, interleaved over ROUNDS; prints ms/iteration of
# each (mean of iterations 2..N), their ratio, and the all-reduce bytes per iteration next
# to the paper's count (4 all-reduces of b*s*h per layer and micro-batch, plus embedding,
# output layer and cross-entropy).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
ROUNDS=${ROUNDS:-2}
ITERS=${ITERS:-5}
out=$(mktemp -d)
ARGS="train --model-preset gpt2-small --mock-data --micro-batch-size 4 --global-batch-size 4
      --train-iters $ITERS --log-interval 1 --eval-iters 0 --peak-tflops 1"
for ((i = 1; i <= ROUNDS; i++)); do
  build/trident $ARGS --threads 2 --metrics-file "$out/t1_$i.jsonl" > /dev/null
  mpirun --oversubscribe -np 2 build/trident $ARGS --tensor-model-parallel-size 2 --threads 1 \
    --metrics-file "$out/t2_$i.jsonl" > /dev/null
  t1=$(mean_ms "$out/t1_$i.jsonl"); t2=$(mean_ms "$out/t2_$i.jsonl")
  /usr/bin/python3 -c "print(f'round $i: t=1 (1 rank x 2 threads) {$t1:.0f} ms/iter | t=2 (2 ranks x 1 thread) {$t2:.0f} ms/iter | throughput ratio t=2/t=1 = {$t1/$t2:.3f}')"
done
/usr/bin/python3 - "$out/t2_1.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
c = [r for r in rows if "collectives" in r][-1]
ar = c["collectives"]["tensor"]["all-reduce"]
b, s, h, L, m = 4, 256, 768, 12, 1
paper = m * (4 * L * b * s * h + 2 * b * s * h + 3 * b * s) * 4 + 8
print(f"all-reduce per iteration: {ar['calls'] / c['iterations']:.0f} calls, {ar['bytes'] / c['iterations'] / 2**20:.2f} MiB;"
      f" formula m*(4*L*b*s*h + 2*b*s*h + 3*b*s)*4 B + norm = {paper / 2**20:.2f} MiB")
PY
rm -rf "$out"
