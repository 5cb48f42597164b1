#!/usr/bin/env bash
# gpt2-small (b=4, s=256, global batch 8): d=2 as 2 ranks x 1 thread against one process x
# 2 threads, interleaved over ROUNDS; the time waited for gradient reduction with and
# without --overlap-grad-reduce (the hidden fraction); the same for the distributed
# optimizer, whose exposed time is the reduce-scatter wait plus the parameter all-gather
# wait, with and without --overlap-grad-reduce --overlap-param-gather; then peak RSS per
# rank with the distributed optimizer at d = 2 and 4 against the printed memory plan.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
ROUNDS=${ROUNDS:-2}
ITERS=${ITERS:-5}
out=$(mktemp -d)
ARGS="train --model-preset gpt2-small --mock-data --micro-batch-size 4 --global-batch-size 8
      --train-iters $ITERS --log-interval 1 --eval-iters 0 --peak-tflops 1"
wait_ms() { grep "data parallel:" "$1" | sed 's/.*waited \([0-9.]*\) ms.*/\1/'; }
# Distributed optimizer: reduce-scatter wait + all-gather wait.
exposed_ms() {
  grep "data parallel:" "$1" |
    sed 's/.*waited \([0-9.]*\) ms for the reduce-scatter.*waiting \([0-9.]*\) ms.*/\1 \2/' |
    awk '{print $1 + $2}'
}
for ((i = 1; i <= ROUNDS; i++)); do
  build/trident $ARGS --threads 2 --metrics-file "$out/one_$i.jsonl" > "$out/one_$i.log"
  mpirun --oversubscribe -np 2 build/trident $ARGS --threads 1 --overlap-grad-reduce \
    --metrics-file "$out/ov_$i.jsonl" > "$out/ov_$i.log"
  mpirun --oversubscribe -np 2 build/trident $ARGS --threads 1 \
    --metrics-file "$out/no_$i.jsonl" > "$out/no_$i.log"
  one=$(mean_ms "$out/one_$i.jsonl"); ov=$(mean_ms "$out/ov_$i.jsonl"); no=$(mean_ms "$out/no_$i.jsonl")
  wov=$(wait_ms "$out/ov_$i.log"); wno=$(wait_ms "$out/no_$i.log")
  /usr/bin/python3 -c "print(f'round $i: one process {$one:.0f} ms/iter | d=2 overlapped {$ov:.0f} ms/iter (ratio {$one/$ov:.3f}) | d=2 not overlapped {$no:.0f} ms/iter (ratio {$one/$no:.3f}) | reduction wait {$wov:.0f} vs {$wno:.0f} ms: {100*(1-$wov/max($wno,1e-9)):.0f}% hidden')"
  DIST="--use-distributed-optimizer"
  mpirun --oversubscribe -np 2 build/trident $ARGS --threads 1 $DIST --overlap-grad-reduce \
    --overlap-param-gather --metrics-file "$out/dov_$i.jsonl" > "$out/dov_$i.log"
  mpirun --oversubscribe -np 2 build/trident $ARGS --threads 1 $DIST \
    --metrics-file "$out/dno_$i.jsonl" > "$out/dno_$i.log"
  dov=$(mean_ms "$out/dov_$i.jsonl"); dno=$(mean_ms "$out/dno_$i.jsonl")
  eov=$(exposed_ms "$out/dov_$i.log"); eno=$(exposed_ms "$out/dno_$i.log")
  /usr/bin/python3 -c "print(f'round $i: distributed optimizer d=2 overlapped {$dov:.0f} ms/iter (ratio to one process {$one/$dov:.3f}) | not overlapped {$dno:.0f} ms/iter (ratio {$one/$dno:.3f}) | reduce-scatter + all-gather exposed {$eov:.0f} vs {$eno:.0f} ms: {100*(1-$eov/max($eno,1e-9)):.0f}% hidden')"
done
echo "distributed optimizer, gpt2-small b=1, peak RSS of rank 0 vs its plan:"
for d in 2 4; do
  mpirun --oversubscribe -np $d build/trident train --model-preset gpt2-small --mock-data \
    --micro-batch-size 1 --global-batch-size $d --train-iters 2 --log-interval 1 --eval-iters 0 \
    --peak-tflops 1 --threads 1 --use-distributed-optimizer | grep -E "optimizer state|peak RSS" |
    sed "s/^/  d=$d: /"
done
rm -rf "$out"
