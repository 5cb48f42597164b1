#!/usr/bin/env bash
# The demo's figure of merit (issue 39's target: at most 1.50 bits per byte on the held-out
# KJV chapters 1166-1189 after ~4 minutes of training on 2 cores): runs scripts/demo.sh as
# setup.sh does and prints its held-out bits per byte, training wall time and tokens/s.
# With --baseline it then trains the previous demo under the same clock (GPT-2's tokenizer
# and architecture, 4 layers, hidden 256, seq 128, 250 steps of 16 x 128 tokens) and scores
# it on the same text, for the ratio. Run it on a quiet machine: the budget is wall time.
#   bash bench/demo_bpb.sh [--baseline]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
HELDOUT=data/kjv/heldout_chapters.txt

summary() {  # name, training log, results JSON
  /usr/bin/python3 - "$@" <<'PY'
import json, re, sys
name, log, results = sys.argv[1:4]
text = open(log).read()
wall = re.search(r"wall time: (\S+) \(training steps (\S+)\)", text).group(2)
tokens = re.search(r"tokens trained: (\d+) \((\d+) tokens/s\)", text)
bpb = next(iter(json.load(open(results))["results"].values()))["bits_per_byte,none"]
print(f"{name:9s} held-out bits per byte {bpb:.4f}   training {wall}   "
      f"{tokens.group(1)} tokens at {tokens.group(2)} tokens/s")
PY
}

TMPDIR=$OUT bash scripts/demo.sh > "$OUT/demo.log" 2>&1
summary demo "$OUT/demo.log" "$OUT/trident_demo/heldout.json"
echo "target: <= 1.50 bits per byte in ~4 minutes of training"

if [[ ${1:-} == --baseline ]]; then
  build/trident train --data-path data/kjv/kjv_text_document --split 1165,24,0 \
    --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe \
    --num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 128 \
    --micro-batch-size 8 --global-batch-size 16 --train-iters 250 \
    --lr 2e-3 --min-lr 2e-4 --lr-decay-style cosine --lr-warmup-iters 25 \
    --weight-decay 0.1 --clip-grad 1.0 --log-interval 50 --eval-iters 0 \
    --save "$OUT/baseline" --save-interval 250 > "$OUT/baseline.log" 2>&1
  build/trident eval --load "$OUT/baseline" --tasks "text:$HELDOUT" \
    --output "$OUT/baseline.json" > /dev/null 2>&1
  summary baseline "$OUT/baseline.log" "$OUT/baseline.json"
fi
