#pragma once
// A SentencePiece model (Kudo & Richardson 2018; the tokenizer of Llama, Mistral, T5) read
// through Debian's libsentencepiece, as Megatron's GPTSentencePieceTokenizer: ids are the
// model's, nothing is added to its vocabulary, and the end-of-document token is the model's
// </s> (eos). Encoding and decoding are the library's own, so ids equal `spm_encode`'s.
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace trident::tokenizer {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // Throws std::runtime_error naming model_file: unreadable, not a SentencePiece model, or
  // without an eos piece (trident needs one as the end-of-document token).
  explicit SentencePieceTokenizer(const std::string& model_file);
  ~SentencePieceTokenizer() override;

  using Tokenizer::encode;
  void encode(std::string_view text, std::vector<int>* ids) const override;
  std::string decode_bytes(const std::vector<int>& ids) const override;
  std::string decode(const std::vector<int>& ids) const override;
  int vocab_size() const override { return vocab_size_; }
  int eod() const override { return eos_; }
  int bos() const override { return bos_; }  // -1 when the model has none
  int eos() const { return eos_; }

 private:
  void check_ids(const std::vector<int>& ids) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  int vocab_size_ = 0, bos_ = -1, eos_ = -1;
};

}  // namespace trident::tokenizer
