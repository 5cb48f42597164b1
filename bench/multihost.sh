#!/usr/bin/env bash
# Between network-namespace hosts (TCP over veth + bridge) against inside one host (shared
# memory), 2 ranks each (root; scripts/cluster/hosts.sh):
# 1. point-to-point and all-reduce latency (8 B) and bandwidth (512 KiB, 8 MiB) through trident's
#    communicator, without and with the hang watchdog (bench_comm);
# 2. gpt2-small d = 2 (b = 4, s = 256, global batch 8, 1 thread per rank): ms/iteration across
#    2 hosts against on one host, the efficiency across hosts;
# 3. the watchdog's cost in training: gpt2-small t = 2 and d = 2 on one host with
#    --distributed-timeout-minutes 0 (off: blocking MPI calls) against the default 10.
# Runs alternate over ROUNDS; figures are means of the iterations after the first.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
ROUNDS=${ROUNDS:-2}
ITERS=${ITERS:-4}
out=$(mktemp -d)
trap 'bash scripts/cluster/hosts.sh destroy > /dev/null; rm -rf "$out"' EXIT
bash scripts/cluster/hosts.sh create 2 1 > /dev/null
LOCAL=(mpirun -np 2)
ACROSS=(scripts/cluster/launch.sh -np 2)

comm_row() {  # file op bytes watchdog -> "us GB/s"
  grep "\"op\": \"$2\", \"bytes\": $3, \"watchdog\": $4" "$1" |
    sed 's/.*"us": \([0-9.]*\), "gb_per_s": \([0-9.]*\).*/\1 us, \2 GB\/s/'
}
"${LOCAL[@]}" build/bench/bench_comm 64 200 > "$out/comm_local" 2> /dev/null
"${ACROSS[@]}" build/bench/bench_comm 64 200 > "$out/comm_across" 2> /dev/null
for w in false true; do
  for op in p2p all-reduce; do
    for bytes in 8 524288 8388608; do
      echo "comm $op $bytes B watchdog=$w: one host $(comm_row "$out/comm_local" $op $bytes $w) | across hosts $(comm_row "$out/comm_across" $op $bytes $w)"
    done
  done
done

ARGS="train --model-preset gpt2-small --mock-data --micro-batch-size 4 --global-batch-size 8
      --train-iters $ITERS --log-interval 1 --eval-iters 0 --peak-tflops 1 --threads 1"
for ((i = 1; i <= ROUNDS; i++)); do
  "${LOCAL[@]}" build/trident $ARGS --metrics-file "$out/l_$i.jsonl" > /dev/null
  "${ACROSS[@]}" build/trident $ARGS --metrics-file "$out/a_$i.jsonl" > /dev/null
  "${LOCAL[@]}" build/trident $ARGS --distributed-timeout-minutes 0 --metrics-file "$out/l0_$i.jsonl" > /dev/null
  "${LOCAL[@]}" build/trident $ARGS --tensor-model-parallel-size 2 --metrics-file "$out/t_$i.jsonl" > /dev/null
  "${LOCAL[@]}" build/trident $ARGS --tensor-model-parallel-size 2 --distributed-timeout-minutes 0 \
    --metrics-file "$out/t0_$i.jsonl" > /dev/null
  l=$(mean_ms "$out/l_$i.jsonl"); a=$(mean_ms "$out/a_$i.jsonl"); l0=$(mean_ms "$out/l0_$i.jsonl")
  t=$(mean_ms "$out/t_$i.jsonl"); t0=$(mean_ms "$out/t0_$i.jsonl")
  /usr/bin/python3 -c "print(f'round $i: gpt2-small d=2 one host {$l:.0f} ms/iter, across 2 hosts {$a:.0f} ms/iter (efficiency {$l/$a:.3f}) | watchdog cost: d=2 {$l:.0f} vs {$l0:.0f} ms ({100*($l/$l0-1):+.2f}%), t=2 {$t:.0f} vs {$t0:.0f} ms ({100*($t/$t0-1):+.2f}%)')"
done
