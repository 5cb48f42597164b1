#pragma once
// A HuggingFace tokenizer.json (Megatron's HuggingFaceTokenizer), encoded as HF `tokenizers`'
// encode(text, add_special_tokens=False): added tokens found in the text, each other segment
// normalized, pre-tokenized and encoded by the BPE model. tokenizer_config.json, when next to
// it, names the BOS and EOS tokens (EOS is the end-of-document id); it never changes ids.
// The post-processor (the template add_special_tokens would apply) is not used: --add-bos
// and --append-eod add what the data needs.
#include <memory>
#include <string>
#include <unordered_map>

#include "tokenizer/hf_added_tokens.h"
#include "tokenizer/hf_bpe.h"
#include "tokenizer/hf_decoders.h"
#include "tokenizer/hf_normalizers.h"
#include "tokenizer/hf_pre_tokenizers.h"
#include "tokenizer/tokenizer.h"

namespace trident::tokenizer {

// The files of a HuggingFace tokenizer given as `path`: tokenizer.json itself, or a directory
// holding it; tokenizer_config.json beside it ("" when there is none).
struct HfTokenizerFiles {
  std::string tokenizer_json, tokenizer_config;
};
HfTokenizerFiles find_hf_tokenizer_files(const std::string& path);

class HuggingFaceTokenizer : public Tokenizer {
 public:
  // Throws std::runtime_error naming the file and the problem: unreadable, not JSON, a
  // component trident does not implement (named), no end-of-document token.
  // Throws FormatError (a std::runtime_error) for a malformed file, std::runtime_error for
  // one that cannot be read.
  explicit HuggingFaceTokenizer(const std::string& path);
  // A tokenizer.json given as text (no tokenizer_config.json); `name` names it in errors.
  // Throws FormatError when it is not JSON or not a tokenizer trident reads.
  static std::unique_ptr<HuggingFaceTokenizer> from_json_text(std::string_view text,
                                                              const std::string& name);

  using Tokenizer::encode;
  // text must be valid UTF-8 (std::invalid_argument otherwise).
  void encode(std::string_view text, std::vector<int>* ids) const override;
  // Each token's text through the decoder on its own, concatenated (a stream's pieces).
  std::string decode_bytes(const std::vector<int>& ids) const override;
  // HF's decode(ids, skip_special_tokens=False), invalid UTF-8 replaced by U+FFFD.
  std::string decode(const std::vector<int>& ids) const override;

  int vocab_size() const override { return vocab_size_; }
  int eod() const override { return eos_; }
  int bos() const override { return bos_; }
  const HfTokenizerFiles& files() const { return files_; }

 private:
  HuggingFaceTokenizer(const std::string& name, const nlohmann::json& j);
  void build(const nlohmann::json& j);
  void read_config();
  int token_id(const std::string& content) const;  // -1 when absent
  const std::string& token_text(int id) const;     // std::out_of_range outside the vocabulary
  void encode_segment(std::string_view raw, bool at_start, std::vector<int>* ids) const;
  void encode_pieces(std::string_view text, bool at_start, std::vector<int>* ids) const;

  HfTokenizerFiles files_;
  std::unique_ptr<HfNormalizer> normalizer_;
  std::unique_ptr<HfPreTokenizer> pre_tokenizer_;
  std::unique_ptr<HfBpe> model_;
  std::unique_ptr<HfAddedTokens> added_;
  std::unique_ptr<HfDecoder> decoder_;
  std::unordered_map<int, std::string> added_text_;  // id -> content
  int vocab_size_ = 0, bos_ = -1, eos_ = -1;
  // The pre-tokenizers end in ByteLevel without its regex or prefix space (Llama 3, Qwen):
  // that step is left to the model, which then caches pieces by their raw bytes.
  bool byte_level_last_ = false;
};

}  // namespace trident::tokenizer
