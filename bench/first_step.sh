#!/usr/bin/env bash
# The first step against the steady ones (issue 38: step 1 <= 1.3x a steady step, its log
# line within 25 s of launch): the 774M gpt2-large shape, B4 T256, 3 iterations, bf16 by
# default (BF16=0: fp32), once with huge pages and once with --no-huge-pages. Prints per run
# the start-up phases' total, step 1 and the mean of steps 2-3, their ratio, when the
# iteration-1 line appeared after launch, the minor page faults (the kernel's count, from
# GNU time) and the system time. The start-up total counts from the process's start (its
# first phase, launch, is MPI's start and the process groups). Run it without `chrt`: a
# real-time trident on every core starves the loop that timestamps its lines.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d -p "${TMPDIR:-/var/tmp}")
trap 'rm -rf "$out"' EXIT
PRECISION=$([[ ${BF16:-1} == 1 ]] && echo --bf16 || true)
ARGS="train --mock-data --num-layers 36 --hidden-size 1280 --num-attention-heads 20
      --seq-length 256 --max-position-embeddings 1024 --vocab-size 50257 --micro-batch-size 4
      --global-batch-size 4 --train-iters 3 --eval-iters 0 --log-interval 1 --peak-tflops 224
      $PRECISION"
for pages in huge small; do
  extra=$([[ $pages == small ]] && echo --no-huge-pages || true)
  start=$(date +%s.%N)
  /usr/bin/time -o "$out/time.txt" -f "%R %S" stdbuf -oL build/trident $ARGS $extra 2>&1 |
    while IFS= read -r line; do echo "$(date +%s.%N) $line"; done > "$out/log.txt"
  read -r faults system < "$out/time.txt"
  first=$(grep -m1 "iteration        1/" "$out/log.txt" | cut -d' ' -f1)
  startup=$(grep -o "total [0-9.]* s before step 1" "$out/log.txt" | awk '{print $2}')
  steps=($(grep -o "per iteration (ms): [0-9.]*" "$out/log.txt" | awk '{print $4}'))
  steady=$(echo "(${steps[1]} + ${steps[2]}) / 2" | bc -l)
  printf '%s pages: start-up %.1f s, step 1 %.1f s, steady %.1f s (step 1 / steady %.2f), ' \
    "$pages" "$startup" "$(echo "${steps[0]} / 1000" | bc -l)" "$(echo "$steady / 1000" | bc -l)" \
    "$(echo "${steps[0]} / $steady" | bc -l)"
  printf 'first line %.1f s after launch, %d page faults, %.1f s system time\n' \
    "$(echo "$first - $start" | bc)" "$faults" "$system"
done
