#include "tokenizer/unicode_classes.h"

#include <unicode/uchar.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace trident::tokenizer {

UnicodeClasses::UnicodeClasses() : table_(0x110000, kOther) {
  for (UChar32 c = 0; c < 0x110000; ++c) {
    std::uint8_t v = kOther;
    switch (u_charType(c)) {
      case U_UPPERCASE_LETTER:
      case U_LOWERCASE_LETTER:
      case U_TITLECASE_LETTER:
      case U_MODIFIER_LETTER:
      case U_OTHER_LETTER:
        v = kLetter;
        break;
      case U_DECIMAL_DIGIT_NUMBER:
      case U_LETTER_NUMBER:
      case U_OTHER_NUMBER:
        v = kNumber;
        break;
      default:
        break;
    }
    if (u_hasBinaryProperty(c, UCHAR_WHITE_SPACE)) v |= kSpace;
    bool js_space = u_charType(c) == U_SPACE_SEPARATOR || (c >= 0x09 && c <= 0x0d) || c == 0xfeff ||
                    c == 0x2028 || c == 0x2029;
    if (js_space) v |= kJsSpace;
    table_[c] = v;
  }
}

const UnicodeClasses& UnicodeClasses::instance() {
  static const UnicodeClasses classes;
  return classes;
}

int decode_utf8(std::string_view s, size_t i, char32_t* cp) {
  const auto b = [&](size_t k) { return (unsigned char)s[k]; };
  unsigned char c = b(i);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
  if (len == 0 || c > 0xf4 || i + len > s.size()) return 0;
  char32_t v = c & (0x7f >> len);
  for (int k = 1; k < len; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    v = (v << 6) | (b(i + k) & 0x3f);
  }
  static const char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < kMin[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return len;
}

void append_utf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back((char)cp);
    return;
  }
  // Lead byte: as many high 1 bits as bytes, then the top bits of cp; each continuation byte
  // is 10 and six bits of cp, most significant first.
  const int len = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  static const unsigned char kLead[5] = {0, 0, 0xc0, 0xe0, 0xf0};
  out->push_back((char)(kLead[len] | (cp >> (6 * (len - 1)))));
  for (int k = len - 2; k >= 0; --k) out->push_back((char)(0x80 | ((cp >> (6 * k)) & 0x3f)));
}

bool is_valid_utf8(std::string_view s, size_t* bad_offset) {
  for (size_t i = 0; i < s.size();) {
    // Eight ASCII bytes at a time: most text is mostly ASCII.
    std::uint64_t word;
    if (i + 8 <= s.size() && (std::memcpy(&word, s.data() + i, 8), !(word & 0x8080808080808080))) {
      i += 8;
      continue;
    }
    char32_t cp;
    int n = decode_utf8(s, i, &cp);
    if (n == 0) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += n;
  }
  return true;
}

std::string read_utf8_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t bad;
  if (!is_valid_utf8(text, &bad))
    throw std::runtime_error(path + ": invalid UTF-8 at byte " + std::to_string(bad));
  return text;
}

}  // namespace trident::tokenizer
