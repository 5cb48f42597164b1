#!/usr/bin/env bash
# What the hang watchdog and the timers cost a training step: gpt2-small (b = 4, s = 256,
# 1 thread per rank) at t = 2 and at d = 2 on this host, each run with both off
# (--distributed-timeout-minutes 0: plain blocking MPI calls; --timing-log-level 0) and with
# both on (the default 10-minute watchdog; --timing-log-level 2: every timer and every
# collective kind, gathered from all ranks at each log line). The runs alternate over ROUNDS;
# each prints the median ms/iteration of iterations 2..N and the on/off ratio, and the last
# line the median ratio over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-6}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
ARGS="train --model-preset gpt2-small --mock-data --micro-batch-size 4 --global-batch-size 8
      --train-iters $ITERS --log-interval 1 --eval-iters 0 --peak-tflops 1 --threads 1"
median_ms() {
  /usr/bin/python3 -c "import json,statistics,sys; r=[json.loads(l) for l in open(sys.argv[1])]; \
print(statistics.median([x['ms_per_iter'] for x in r if 'ms_per_iter' in x][1:]))" "$1"
}
run() {  # name, flags
  mpirun -np 2 build/trident $ARGS --metrics-file "$out/$1.jsonl" "${@:2}" > /dev/null
  median_ms "$out/$1.jsonl"
}
OFF="--distributed-timeout-minutes 0 --timing-log-level 0"
ON="--distributed-timeout-minutes 10 --timing-log-level 2"
ratios=()
for ((i = 1; i <= ROUNDS; i++)); do
  for layout in "--tensor-model-parallel-size 2" "--tensor-model-parallel-size 1"; do
    off=$(run "off_$i" $layout $OFF)
    on=$(run "on_$i" $layout $ON)
    ratio=$(/usr/bin/python3 -c "print(f'{$on / $off:.4f}')")
    ratios+=("$ratio")
    name=$([[ $layout == *2 ]] && echo "t=2" || echo "d=2")
    echo "round $i $name: off $off ms/iter, on $on ms/iter, on/off $ratio"
  done
done
/usr/bin/python3 -c "import statistics; r=[${ratios[*]/%/,}]; \
print(f'median on/off over {len(r)} runs: {statistics.median(r):.4f} (cost {100 * (statistics.median(r) - 1):+.2f}%)')"
