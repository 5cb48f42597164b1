#pragma once
// What every command needs from a tokenizer (Megatron's MegatronTokenizer): text to ids, ids
// to text, the vocabulary size and the end-of-document id. GPT2Tokenizer and
// SentencePieceTokenizer implement it; build_tokenizer (build_tokenizer.h) picks one.
#include <string>
#include <string_view>
#include <vector>

namespace trident::tokenizer {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Appends the ids of text (valid UTF-8) to ids; no end-of-document token is added.
  virtual void encode(std::string_view text, std::vector<int>* ids) const = 0;
  std::vector<int> encode(std::string_view text) const {
    std::vector<int> ids;
    encode(text, &ids);
    return ids;
  }
  // The bytes of each token, concatenated: decode_bytes(a) + decode_bytes(b) equals
  // decode_bytes(a + b), so a stream of generated tokens can be decoded one at a time.
  // May hold invalid UTF-8 (a token boundary inside a character). Throws std::out_of_range
  // for an id outside the vocabulary.
  virtual std::string decode_bytes(const std::vector<int>& ids) const = 0;
  // The text of a whole sequence, valid UTF-8 (invalid bytes become U+FFFD).
  virtual std::string decode(const std::vector<int>& ids) const = 0;

  virtual int vocab_size() const = 0;
  virtual int eod() const = 0;  // appended by --append-eod; generation stops on it
  // The beginning-of-sequence id (SentencePiece's <s>) put first by --add-bos, as Megatron's
  // and HF's Llama tokenizers do; -1 when the vocabulary has none (GPT-2's).
  virtual int bos() const { return -1; }
};

}  // namespace trident::tokenizer
