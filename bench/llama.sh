#!/usr/bin/env bash
# The issue's ~125M Llama-shaped model (12 layers, hidden 768, 12 heads, 4 query groups,
# SwiGLU ffn 2048, vocab 32000, RMSNorm, RoPE, untied, no biases) next to the GPT-2 config of
# the same size (gpt2-small), fp32 and bf16: ms/step (mean after the first), MFU and peak RSS
# from the metrics file; then PyTorch training the same Llama (bench/llama_torch.py, same
# threads) and trident's speed-up over it. ITERS (default 4) and SEQ (default 1024) override
# the run length.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
out=$(mktemp -d -p "${TMPDIR:-/tmp}")
trap 'rm -rf "$out"' EXIT
ITERS=${ITERS:-4}
SEQ=${SEQ:-1024}
COMMON="train --mock-data --micro-batch-size 1 --global-batch-size 1 --seq-length $SEQ
        --train-iters $ITERS --log-interval 1 --eval-iters 0 --threads $(nproc)"
GPT2="--model-preset gpt2-small"
LLAMA="--num-layers 12 --hidden-size 768 --num-attention-heads 12 --group-query-attention
       --num-query-groups 4 --swiglu --ffn-hidden-size 2048 --vocab-size 32000
       --normalization RMSNorm --position-embedding-type rope
       --untie-embeddings-and-output-weights --disable-bias-linear"
report() {  # name, metrics file, log: ms/step (mean after the first), last MFU, peak RSS
  /usr/bin/python3 - "$1" "$2" "$(grep -m1 '^peak RSS' "$3")" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[2])]
steps = [r for r in rows if "ms_per_iter" in r]
steps = steps[1:] or steps
ms = sum(r["ms_per_iter"] for r in steps) / len(steps)
print(f"{sys.argv[1]:<12} {ms:10.0f} ms/step   MFU {steps[-1].get('mfu')}   {sys.argv[3]}")
open(sys.argv[2] + ".ms", "w").write(f"{ms}\n")
PY
}
for precision in fp32 bf16; do
  flag=$([ $precision = bf16 ] && echo --bf16 || true)
  for model in GPT2 LLAMA; do
    build/trident $COMMON ${!model} $flag --max-position-embeddings $SEQ \
      --metrics-file "$out/$model-$precision.jsonl" > "$out/$model-$precision.log"
    grep -m1 "^model:" "$out/$model-$precision.log" | sed "s/^/  $model: /"
    report "$model $precision" "$out/$model-$precision.jsonl" "$out/$model-$precision.log"
  done
done
/usr/bin/python3 bench/llama_torch.py "$SEQ" "$ITERS" "$(nproc)" | while read -r line; do
  /usr/bin/python3 - "$line" "$out" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
mine = float(open(f"{sys.argv[2]}/LLAMA-{r['precision']}.jsonl.ms").read())
print(f"PyTorch {r['precision']:<4} {r['ms_per_step']:10.0f} ms/step   trident is {r['ms_per_step'] / mine:.2f}x faster")
PY
done
