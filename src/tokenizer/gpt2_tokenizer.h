#pragma once
// GPT-2's byte-level BPE (Radford et al. 2019): text -> pre-tokenized pieces -> UTF-8
// bytes mapped to printable code points -> merges applied by rank -> ids. Reads the
// standard vocab.json/encoder.json and merges.txt/vocab.bpe files.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_merge.h"
#include "tokenizer/tokenizer.h"

namespace trident::tokenizer {

class GPT2Tokenizer : public Tokenizer {
 public:
  static constexpr int kEndOfText = 50256;

  // Throws std::runtime_error naming the file and the problem.
  GPT2Tokenizer(const std::string& vocab_file, const std::string& merges_file);

  // text must be valid UTF-8 (see is_valid_utf8). `<|endoftext|>` in text is plain text,
  // as in GPT-2's encoder.py; append eod() explicitly.
  using Tokenizer::encode;
  void encode(std::string_view text, std::vector<int>* ids) const override;
  // Raw bytes; invalid UTF-8 (a token boundary inside a character) is left to the caller.
  std::string decode_bytes(const std::vector<int>& ids) const override;
  // UTF-8 with invalid sequences replaced by U+FFFD, as the reference decoders do.
  std::string decode(const std::vector<int>& ids) const override;

  int vocab_size() const override { return (int)id_to_bytes_.size(); }
  int eod() const override { return eod_; }
  void set_js_whitespace(bool on) { js_whitespace_ = on; }

 private:
  void bpe(std::string_view piece, std::vector<int>* out) const;

  std::vector<std::string> id_to_bytes_;  // raw bytes of each token
  int byte_to_id_[256];                   // single-byte tokens
  BpeMerges merges_;
  int eod_ = kEndOfText;
  // Names this tokenizer's vocabulary for the per-thread BPE cache: an address could be
  // reused by a later tokenizer with other files (a copy shares the id and the vocabulary).
  std::uint64_t cache_id_;
  bool js_whitespace_ = false;
};

// The printable code point GPT-2 assigns to each byte (bytes_to_unicode).
char32_t byte_to_unicode(unsigned char b);
// Replaces invalid UTF-8 sequences with U+FFFD (one per maximal invalid subpart).
std::string sanitize_utf8(std::string_view s);

}  // namespace trident::tokenizer
