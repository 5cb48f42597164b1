#include "tokenizer/build_tokenizer.h"

#include <stdexcept>

#include "tokenizer/gpt2_tokenizer.h"
#include "tokenizer/huggingface_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"

namespace trident::tokenizer {

bool TokenizerOptions::sentencepiece() const {
  return tokenizer_type == kSentencePieceTokenizer || tokenizer_type == kGPTSentencePieceTokenizer;
}

bool TokenizerOptions::given() const {
  return reads_model() ? !tokenizer_model.empty() : !vocab_file.empty() && !merge_file.empty();
}

std::string TokenizerOptions::source() const {
  return reads_model() ? "--tokenizer-model " + tokenizer_model : "--vocab-file " + vocab_file;
}

std::vector<std::string> check_tokenizer_options(const TokenizerOptions& o) {
  std::vector<std::string> errors;
  const std::string& type = o.tokenizer_type;
  if (type != kGPT2BPETokenizer && !o.reads_model()) {
    errors.push_back("--tokenizer-type " + type + ": expected " + kGPT2BPETokenizer + ", " +
                     kSentencePieceTokenizer + " or " + kHuggingFaceTokenizer);
    return errors;
  }
  if (o.reads_model()) {
    if (o.tokenizer_model.empty())
      errors.push_back(
          "--tokenizer-type " + type + " needs --tokenizer-model (" +
          (o.huggingface() ? "a tokenizer.json or its folder" : "a SentencePiece .model file") +
          ")");
    if (!o.vocab_file.empty() || !o.merge_file.empty())
      errors.push_back("--vocab-file and --merge-file are " + std::string(kGPT2BPETokenizer) +
                       "'s; " + type + " reads only --tokenizer-model");
    return errors;
  }
  if (!o.tokenizer_model.empty())
    errors.push_back("--tokenizer-model is read by --tokenizer-type " +
                     std::string(kSentencePieceTokenizer) + " or " + kHuggingFaceTokenizer +
                     " (the type is " + type + ")");
  if (o.vocab_file.empty() != o.merge_file.empty())
    errors.push_back("--vocab-file and --merge-file go together (the GPT-2 tokenizer needs both)");
  return errors;
}

std::unique_ptr<Tokenizer> build_tokenizer(const TokenizerOptions& o) {
  std::vector<std::string> errors = check_tokenizer_options(o);
  if (errors.empty() && !o.given())
    errors.push_back("--tokenizer-type " + o.tokenizer_type +
                     " needs --vocab-file and --merge-file (GPT-2's encoder.json and vocab.bpe)");
  if (!errors.empty()) {
    std::string all = errors[0];
    for (size_t i = 1; i < errors.size(); ++i) all += "; " + errors[i];
    throw std::invalid_argument(all);
  }
  try {
    if (o.sentencepiece()) return std::make_unique<SentencePieceTokenizer>(o.tokenizer_model);
    if (o.huggingface()) return std::make_unique<HuggingFaceTokenizer>(o.tokenizer_model);
    auto gpt2 = std::make_unique<GPT2Tokenizer>(o.vocab_file, o.merge_file);
    gpt2->set_js_whitespace(o.js_whitespace);
    return gpt2;
  } catch (const std::runtime_error& e) {
    // The readers name the file; say which flag gave it. A bad file is bad input.
    throw std::invalid_argument(
        (o.reads_model() ? "--tokenizer-model " : "--vocab-file/--merge-file ") +
        std::string(e.what()));
  }
}

}  // namespace trident::tokenizer
