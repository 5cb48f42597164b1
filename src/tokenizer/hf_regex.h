#pragma once
// A regular expression of a tokenizer.json (Split patterns, Replace normalizers and
// decoders), compiled by PCRE2 with Unicode properties (\p{L}, \p{N}), look-ahead and JIT:
// HF `tokenizers` compiles them with Oniguruma, whose syntax these patterns are written in.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/hf_split_scanner.h"

namespace trident::tokenizer {

class HfRegex {
 public:
  // Throws std::runtime_error naming the pattern and PCRE2's message when it does not compile.
  // The Llama 3 and Qwen split patterns run on HfSplitScanner unless use_scanner is false.
  explicit HfRegex(const std::string& pattern, bool use_scanner = true);
  // A pattern matching `literal` exactly (HF's {"String": ...} patterns).
  static HfRegex literal(const std::string& literal);
  ~HfRegex();
  HfRegex(HfRegex&&) noexcept;
  HfRegex& operator=(HfRegex&&) noexcept;

  // The byte ranges of successive non-overlapping matches in valid UTF-8 text, left to
  // right, as the onig crate's find_iter gives them to HF: an empty match counts (it cuts the
  // text), except one where the previous match ended.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>* matches) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  std::string pattern_;
  std::unique_ptr<Code> code_;
  std::unique_ptr<HfSplitScanner> scanner_;  // null: PCRE2 runs the pattern
};

// A tokenizer.json pattern: {"String": text} (matched literally) or {"Regex": pattern}.
// Throws std::runtime_error naming `where` for anything else.
HfRegex parse_hf_pattern(const nlohmann::json& pattern, const std::string& where);

// Escapes every character PCRE2 treats specially, so the result matches `text` literally.
std::string escape_regex(std::string_view text);

}  // namespace trident::tokenizer
