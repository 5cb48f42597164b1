#!/usr/bin/env bash
# Llama-3.2-1B's shape (--model-preset llama3.2-1b: 32 heads sharing 8 key/value heads,
# vocabulary 128256 tied, llama3 RoPE scaling) against the Llama-2-style shape of about the
# same size (the same hidden 2048, layers, SwiGLU 8192; multi-head attention, vocabulary 32000,
# untied, no scaling): fp32 training ms/step of each and the ratio. The two run one after the
# other twice (A B A B) and each shape's figure is the mean of its two runs, so that load from
# elsewhere falls on both; run it as `nice -n -10 bench/llama3_vs_llama2.sh`.
# LAYERS (default 2), SEQ (default 128) and ITERS (default 4) size it; with few layers the
# 128256-row output layer weighs more in Llama 3's step than it would with all 16.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
out=$(mktemp -d -p "${TMPDIR:-/tmp}")
trap 'rm -rf "$out"' EXIT
LAYERS=${LAYERS:-2}
SEQ=${SEQ:-128}
ITERS=${ITERS:-4}
COMMON="train --mock-data --micro-batch-size 1 --global-batch-size 1 --seq-length $SEQ
        --num-layers $LAYERS --train-iters $ITERS --log-interval 1 --eval-iters 0
        --threads $(nproc)"
LLAMA3="--model-preset llama3.2-1b"
LLAMA2="--hidden-size 2048 --num-attention-heads 32 --ffn-hidden-size 8192 --swiglu
        --vocab-size 32000 --max-position-embeddings 4096 --normalization RMSNorm
        --position-embedding-type rope --untie-embeddings-and-output-weights
        --disable-bias-linear"
for round in 1 2; do
  for model in LLAMA3 LLAMA2; do
    build/trident $COMMON ${!model} --metrics-file "$out/$model-$round.jsonl" \
      > "$out/$model-$round.log"
    [ "$round" = 1 ] && grep -m1 "^model:" "$out/$model-$round.log" | sed "s/^/$model /"
    echo "$model round $round: $(mean_ms "$out/$model-$round.jsonl") ms/step"
  done
done
/usr/bin/python3 - "$out" "$SEQ" <<'PY'
import json, sys
out, seq = sys.argv[1], int(sys.argv[2])
def ms(model):
    runs = []
    for r in (1, 2):
        rows = [json.loads(l) for l in open(f"{out}/{model}-{r}.jsonl")]
        steps = [x["ms_per_iter"] for x in rows if "ms_per_iter" in x][1:]
        runs.append(sum(steps) / len(steps))
    return sum(runs) / 2, runs
l3, r3 = ms("LLAMA3")
l2, r2 = ms("LLAMA2")
print(f"Llama-3.2-1B shape {l3:8.0f} ms/step ({seq / l3 * 1e3:6.0f} tokens/s; runs {r3[0]:.0f}, {r3[1]:.0f})")
print(f"Llama-2 shape      {l2:8.0f} ms/step ({seq / l2 * 1e3:6.0f} tokens/s; runs {r2[0]:.0f}, {r2[1]:.0f})")
print(f"ratio Llama-3.2-1B / Llama-2: {l3 / l2:.2f}")
PY
