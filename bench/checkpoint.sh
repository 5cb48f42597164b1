#!/usr/bin/env bash
# Checkpoint save and load of gpt2-small (124M parameters + 2 Adam moments, ~1.5 GB) at 1 and 4
# ranks, next to the disk's sequential write speed measured with dd in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
out=$(mktemp -d -p "${TMPDIR:-/tmp}")
trap 'rm -rf "$out"' EXIT
dd if=/dev/zero of="$out/dd.bin" bs=1M count=1024 conv=fdatasync 2>&1 | tail -1 | sed 's/^/dd sequential write: /'
rm -f "$out/dd.bin"
ARGS="train --model-preset gpt2-small --mock-data --micro-batch-size 1 --global-batch-size 1
      --seq-length 64 --train-iters 1 --eval-iters 0 --peak-tflops 1"
echo "1 rank x 2 threads:"
build/trident $ARGS --threads 2 --save "$out/c1" | grep "saved checkpoint" | sed 's/^/  /'
build/trident $ARGS --threads 2 --load "$out/c1" --train-iters 1 | grep "loaded checkpoint" | sed 's/^/  /'
echo "4 ranks (t=4) x 1 thread:"
mpirun --oversubscribe -np 4 build/trident $ARGS --threads 1 --tensor-model-parallel-size 4 \
  --save "$out/c4" | grep "saved checkpoint" | sed 's/^/  /'
mpirun --oversubscribe -np 4 build/trident $ARGS --threads 1 --tensor-model-parallel-size 4 \
  --load "$out/c4" | grep "loaded checkpoint" | sed 's/^/  /'
