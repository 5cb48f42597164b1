#!/usr/bin/env bash
# The main job on its default: a small GPT trained on the King James Bible (prepared by
# setup.sh as a Megatron dataset), validated on held-out chapters, and asked to continue a
# prompt. About 3 minutes on 2 cores; the validation loss falls from ~10.8 to ~4.6.
set -euo pipefail
cd "$(dirname "$0")/.."
exec build/trident train \
  --data-path data/kjv/kjv_text_document --split 98,2,0 \
  --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe \
  --num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 \
  --micro-batch-size 8 --global-batch-size 16 --train-iters 250 \
  --lr 2e-3 --min-lr 2e-4 --lr-decay-style cosine --lr-warmup-iters 25 \
  --weight-decay 0.1 --clip-grad 1.0 --log-interval 25 --eval-interval 125 --eval-iters 4 \
  --generate-prompt "And God said unto Moses," --generate-tokens 32 \
  --metrics-file "${TMPDIR:-/tmp}/trident_demo_metrics.jsonl" "$@"
