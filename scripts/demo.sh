#!/usr/bin/env bash
# The main job on its default: a small Llama-style GPT (RoPE, RMSNorm, SwiGLU; 4 layers,
# hidden 256, 4.1M parameters) trained on the King James Bible with a tokenizer trained on
# it (setup.sh prepares both): configs/kjv-demo.toml, 700 steps of 2048 tokens, about 4
# minutes on 2 cores. It prints a sampled
# continuation of "And God said unto Moses," every 100 iterations, saves a checkpoint and a
# report page, continues the prompt from the saved checkpoint (KV-cache generation), and
# scores the held-out chapters (1166-1189, never trained on) in bits per byte, as
# lm-evaluation-harness scores wikitext. Extra arguments go to `trident train`.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN="${TMPDIR:-/tmp}/trident_demo"
CKPT="$RUN/checkpoint"
PROMPT="And God said unto Moses,"
rm -rf "$RUN"
mkdir -p "$RUN"
build/trident train --config configs/kjv-demo.toml \
  --save "$CKPT" --save-interval 700 --report-dir "$RUN/report" "$@"

echo
echo "sampled continuation from the saved checkpoint (top-p 0.9, temperature 0.8, seed 1):"
build/trident generate --load "$CKPT" --prompt "$PROMPT" --tokens-to-generate 48 \
  --top-p 0.9 --temperature 0.8 --seed 1 2>/dev/null

build/trident eval --load "$CKPT" --tasks text:data/kjv/heldout_chapters.txt \
  --output "$RUN/heldout.json" > /dev/null
/usr/bin/python3 - "$RUN/heldout.json" <<'PY'
import json, sys
results = json.load(open(sys.argv[1]))["results"]
print(f"\nheld-out bits per byte: {next(iter(results.values()))['bits_per_byte,none']:.4f}")
PY
echo "report page: $RUN/report/report.html"
