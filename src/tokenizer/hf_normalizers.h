#pragma once
// The normalizers of a tokenizer.json ("normalizer"), as HF `tokenizers` defines them:
// NFC, NFD, NFKC, NFKD (ICU), Lowercase, StripAccents, Strip, Prepend, Replace, Sequence.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace trident::tokenizer {

class HfNormalizer {
 public:
  virtual ~HfNormalizer() = default;
  // Rewrites valid UTF-8 text in place.
  virtual void normalize(std::string* text) const = 0;
};

// nullptr for JSON null (no normalizer). Throws std::runtime_error naming a type trident does
// not implement, or a malformed field.
std::unique_ptr<HfNormalizer> parse_normalizer(const nlohmann::json& j);

}  // namespace trident::tokenizer
