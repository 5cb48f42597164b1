#!/usr/bin/env bash
# The main job on its default: a small GPT trained on Megatron-style mock data (runs of
# arithmetic progressions); the loss falls from ~ln(vocab) as the model learns them.
set -euo pipefail
cd "$(dirname "$0")/.."
exec build/trident train --mock-data \
  --num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 128 --vocab-size 1024 \
  --micro-batch-size 8 --global-batch-size 16 --train-iters 300 \
  --lr 2e-3 --min-lr 2e-4 --lr-decay-style cosine --lr-warmup-iters 20 \
  --weight-decay 0.1 --clip-grad 1.0 --log-interval 25 --eval-iters 8 \
  --metrics-file "${TMPDIR:-/tmp}/trident_demo_metrics.jsonl" "$@"
