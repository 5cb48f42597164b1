#pragma once
// The added tokens of a tokenizer.json ("added_tokens"), found in the text before the model
// sees it, as HF `tokenizers` does: leftmost-longest matches, those with normalized = false in
// the raw text, those with normalized = true in the normalized text (their content normalized
// alike); single_word matches only between non-word characters; lstrip / rstrip take the
// whitespace before / after into the token. Special or not, a match is its id (encode with
// add_special_tokens = false still recognises them).
#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/hf_bpe.h"
#include "tokenizer/hf_normalizers.h"

namespace trident::tokenizer {

struct HfAddedToken {
  int id = -1;
  std::string content;
  // What it matches and decodes to: the content, normalized for normalized tokens (as HF).
  std::string text;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// A range of a string: text for the model (id -1), or an added token's match.
struct HfSegment {
  size_t begin, end;
  int id;
};

class HfAddedTokens {
 public:
  // Ids as HF gives them when it reads the file (the listed "id" is not read): a content in
  // the model's vocabulary keeps its id there, any other the next id after the vocabulary's
  // size and the tokens added before. Throws std::runtime_error naming a malformed entry.
  HfAddedTokens(const nlohmann::json& added_tokens, const HfNormalizer* normalizer,
                const TokenIds& model_vocab);

  // Cuts text at the matches of the tokens whose `normalized` flag equals `normalized`;
  // every byte lies in one segment, none empty.
  void split(std::string_view text, bool normalized, std::vector<HfSegment>* segments) const;
  bool any(bool normalized) const { return !patterns_[normalized].empty(); }
  const std::vector<HfAddedToken>& tokens() const { return tokens_; }

 private:
  struct Pattern {
    std::string text;  // the content, normalized for normalized tokens
    int token;         // index into tokens_
  };
  // The longest pattern of the set matching at text[at], or -1.
  int match_at(std::string_view text, size_t at, bool normalized) const;
  // The first position from `at` whose byte starts a pattern of the set, or text.size().
  size_t next_candidate(std::string_view text, size_t at, bool normalized) const;
  int assign_id(const std::string& content, const TokenIds& model_vocab) const;

  std::vector<HfAddedToken> tokens_;
  std::vector<Pattern> patterns_[2];  // [normalized], longest first
  std::array<bool, 256> first_byte_[2] = {};
  int single_first_byte_[2] = {-1, -1};  // the one first byte of the set's patterns, or -1
};

}  // namespace trident::tokenizer
