#pragma once
// Unicode character classes used by GPT-2's pre-tokenization pattern: letters (\p{L}),
// numbers (\p{N}) and whitespace, read once from ICU into a table over all code points.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trident::tokenizer {

enum CharClass : std::uint8_t {
  kOther = 0,
  kLetter = 1,
  kNumber = 2,
  kSpace = 4,    // Unicode White_Space: Python `regex` \s, as in GPT-2's encoder.py
  kJsSpace = 8,  // ECMAScript \s: differs at U+0085 (not space) and U+FEFF (space)
};

class UnicodeClasses {
 public:
  static const UnicodeClasses& instance();
  std::uint8_t of(char32_t cp) const {
    return cp < table_.size() ? table_[cp] : (std::uint8_t)kOther;
  }

 private:
  UnicodeClasses();
  std::vector<std::uint8_t> table_;
};

// Decodes one UTF-8 code point at s[i]; returns its length, or 0 when the bytes there are
// not valid UTF-8 (overlong forms, surrogates and values past U+10FFFF included).
int decode_utf8(std::string_view s, size_t i, char32_t* cp);
bool is_valid_utf8(std::string_view s, size_t* bad_offset = nullptr);
// Appends cp's UTF-8 bytes (1 to 4). Surrogates and values up to 0x1FFFFF are written with
// the same bit layout, unchecked: text decoded leniently (a lone surrogate, a 4-byte form past
// U+10FFFF) goes back out byte for byte. Callers that must refuse them check first.
void append_utf8(char32_t cp, std::string* out);

// A whole file that must be UTF-8 text; throws std::runtime_error naming the file and, for
// invalid text, the byte offset.
std::string read_utf8_file(const std::string& path);

}  // namespace trident::tokenizer
