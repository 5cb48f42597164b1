#pragma once
// The pre-tokenizers of a tokenizer.json ("pre_tokenizer"), as HF `tokenizers` defines them:
// ByteLevel, Split, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation,
// BertPreTokenizer, CharDelimiterSplit, Sequence. Each cuts every piece into smaller ones
// (and ByteLevel and Metaspace rewrite their text); the model then encodes each piece.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trident::tokenizer {

struct HfPiece {
  std::string text;
  // The piece starts at the input's first character (Metaspace's prepend_scheme "first").
  bool at_start = false;
};

class HfPreTokenizer {
 public:
  virtual ~HfPreTokenizer() = default;
  // Replaces *pieces with the pieces each one is cut into, in order; none is empty.
  virtual void pre_tokenize(std::vector<HfPiece>* pieces) const = 0;
  // A pre-tokenizer that only cuts (its pieces are byte ranges of the text, whether or not it
  // starts the input) appends the ranges of `text` it makes, in order, and returns true; the
  // encoder then reads pieces in place instead of copying them. Others return false.
  virtual bool cut(std::string_view, std::vector<std::pair<size_t, size_t>>*) const {
    return false;
  }
};

// nullptr for JSON null (the whole segment is one piece). Throws std::runtime_error naming a
// type trident does not implement, or a malformed field.
std::unique_ptr<HfPreTokenizer> parse_pre_tokenizer(const nlohmann::json& j);

// The UTF-8 text of the printable character GPT-2's byte-level alphabet gives each byte.
const std::string& byte_level_char(unsigned char byte);

}  // namespace trident::tokenizer
