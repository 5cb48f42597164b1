#pragma once
// The split pattern of Llama 3 and of Qwen2 / Qwen2.5 / Qwen3 (GPT-4's cl100k pattern),
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// (Qwen writes \p{N} where Llama 3 writes \p{N}{1,3}), as a hand-written scanner over UTF-8:
// the same matches as PCRE2 gives for the pattern, several times faster. HfRegex uses it when a
// tokenizer.json's pattern is one of the two, character for character; any other pattern goes
// to PCRE2. The character classes (\p{L}, \p{N}, and \s as PCRE2 defines it under UCP) are
// read from PCRE2 itself, so the scanner and the PCRE2 path agree on every code point.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trident::tokenizer {

class HfSplitScanner {
 public:
  // The scanner for `pattern`, or nullptr when it is not one of the two patterns.
  static std::unique_ptr<HfSplitScanner> for_pattern(const std::string& pattern);
  explicit HfSplitScanner(int max_digits);

  // The byte ranges of the successive matches in valid UTF-8 text, as HfRegex::find_all gives
  // them: every character lies in one match (the pattern matches at every position). Invalid
  // UTF-8 is not read past its end; each bad byte counts as a character of no class.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>* matches) const;
  // The end of the match that starts at text[begin] (begin < text.size()).
  size_t match_end(std::string_view text, size_t begin) const;

 private:
  int max_digits_;  // 3 for \p{N}{1,3} (Llama 3), 1 for \p{N} (Qwen)
  const unsigned char* classes_;
};

// The two patterns, character for character as their tokenizer.json files write them.
inline constexpr std::string_view kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwenSplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

}  // namespace trident::tokenizer
