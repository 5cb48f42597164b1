#pragma once
// The normalizers of a tokenizer.json ("normalizer"), as HF `tokenizers` defines them:
// NFC, NFD, NFKC, NFKD (ICU), Lowercase, StripAccents, Strip, Prepend, Replace, Sequence.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace trident::tokenizer {

class HfNormalizer {
 public:
  virtual ~HfNormalizer() = default;
  // Rewrites valid UTF-8 text in place.
  virtual void normalize(std::string* text) const = 0;
  // True when normalize would leave this text as it is (a cheap test: false when unsure), so
  // that the encoder need not copy the text to normalize it.
  virtual bool leaves_unchanged(std::string_view) const { return false; }
};

// nullptr for JSON null (no normalizer). Throws std::runtime_error naming a type trident does
// not implement, or a malformed field.
std::unique_ptr<HfNormalizer> parse_normalizer(const nlohmann::json& j);

}  // namespace trident::tokenizer
