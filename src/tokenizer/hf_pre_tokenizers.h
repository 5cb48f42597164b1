#pragma once
// The pre-tokenizers of a tokenizer.json ("pre_tokenizer"), as HF `tokenizers` defines them:
// ByteLevel, Split, Metaspace, Digits, Whitespace, WhitespaceSplit, Punctuation,
// BertPreTokenizer, CharDelimiterSplit, Sequence. Each cuts every piece into smaller ones
// (and ByteLevel and Metaspace rewrite their text); the model then encodes each piece.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
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
};

// nullptr for JSON null (the whole segment is one piece). Throws std::runtime_error naming a
// type trident does not implement, or a malformed field.
std::unique_ptr<HfPreTokenizer> parse_pre_tokenizer(const nlohmann::json& j);

// The UTF-8 text of the printable character GPT-2's byte-level alphabet gives each byte.
const std::string& byte_level_char(unsigned char byte);

}  // namespace trident::tokenizer
