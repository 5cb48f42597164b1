#pragma once
// Megatron's build_tokenizer: --tokenizer-type picks the tokenizer, --vocab-file and
// --merge-file or --tokenizer-model give its files. Every command that reads text builds
// its tokenizer here.
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace trident::tokenizer {

inline constexpr const char* kGPT2BPETokenizer = "GPT2BPETokenizer";
inline constexpr const char* kSentencePieceTokenizer = "SentencePieceTokenizer";
// Megatron's name for the same SentencePiece semantics (eod = </s>, nothing added).
inline constexpr const char* kGPTSentencePieceTokenizer = "GPTSentencePieceTokenizer";
// A HuggingFace tokenizer.json (and its tokenizer_config.json), Megatron's name.
inline constexpr const char* kHuggingFaceTokenizer = "HuggingFaceTokenizer";

struct TokenizerOptions {
  std::string tokenizer_type = kGPT2BPETokenizer;
  std::string tokenizer_model;         // SentencePiece .model; HF tokenizer.json or its folder
  std::string vocab_file, merge_file;  // GPT-2 encoder.json / vocab.bpe
  bool js_whitespace = false;          // GPT-2: ECMAScript \s, as the npm encoders

  bool sentencepiece() const;
  bool huggingface() const { return tokenizer_type == kHuggingFaceTokenizer; }
  // The type reads --tokenizer-model (SentencePiece, HuggingFace), not GPT-2's two files.
  bool reads_model() const { return sentencepiece() || huggingface(); }
  // A tokenizer can be built: SentencePiece or HuggingFace with its model, or GPT-2 with both
  // of its files.
  bool given() const;
  // The flag and file the tokenizer's vocabulary comes from, for messages.
  std::string source() const;
};

// Every inconsistency between the flags, one message each naming them; GPT-2's files may be
// absent (a command that needs a tokenizer then gets build_tokenizer's error).
std::vector<std::string> check_tokenizer_options(const TokenizerOptions& o);

// Throws std::invalid_argument when the flags are inconsistent or incomplete, or naming the
// flag and the file when a file cannot be read or parsed.
std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerOptions& o);

}  // namespace trident::tokenizer
