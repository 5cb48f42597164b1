#include "tokenizer/hf_split_scanner.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

#include "tokenizer/unicode_classes.h"

namespace trident::tokenizer {

namespace {

enum : unsigned char { kL = 1, kN = 2, kS = 4 };  // \p{L}, \p{N}, \s (PCRE2 with UCP)

// Sets `bit` in table[cp] for every code point PCRE2 matches with `pattern` (a class and +),
// the subject being every code point in order.
void mark_class(const std::string& all, const char* pattern, unsigned char bit,
                std::vector<unsigned char>* table) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  if (!code) throw std::logic_error(std::string("PCRE2 cannot compile ") + pattern);
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  for (size_t start = 0; start < all.size();) {
    if (pcre2_match(code, (PCRE2_SPTR)all.data(), all.size(), start, PCRE2_NO_UTF_CHECK, data,
                    nullptr) < 0)
      break;
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    for (size_t i = ovector[0]; i < ovector[1];) {
      char32_t cp = 0;
      i += decode_utf8(all, i, &cp);
      (*table)[cp] |= bit;
    }
    start = ovector[1];
  }
  pcre2_match_data_free(data);
  pcre2_code_free(code);
}

// The class bits of every code point, as PCRE2 (the fallback path) sees them.
const unsigned char* scanner_classes() {
  static const std::vector<unsigned char> table = [] {
    std::string all;
    all.reserve(0x110000 * 4);
    for (char32_t cp = 0; cp < 0x110000; ++cp)
      if (cp < 0xd800 || cp > 0xdfff) append_utf8(cp, &all);
    std::vector<unsigned char> t(0x110000, 0);
    mark_class(all, R"(\p{L}+)", kL, &t);
    mark_class(all, R"(\p{N}+)", kN, &t);
    mark_class(all, R"(\s+)", kS, &t);
    return t;
  }();
  return table.data();
}

struct Char {
  char32_t cp;
  unsigned length;
  unsigned char cls;
};

// The character at text[i] (i < size). A byte that does not start a well-formed sequence is a
// character of its own, of no class (U+FFFD's), so nothing is read past the text.
inline Char char_at(std::string_view text, size_t i, const unsigned char* classes) {
  const unsigned char c = (unsigned char)text[i];
  if (c < 0x80) return {c, 1, classes[c]};
  const Char bad = {0xfffd, 1, 0};
  unsigned n;
  char32_t cp;
  if (c >= 0xc2 && c < 0xe0)
    n = 2, cp = c & 0x1f;
  else if (c >= 0xe0 && c < 0xf0)
    n = 3, cp = c & 0x0f;
  else if (c >= 0xf0 && c < 0xf5)
    n = 4, cp = c & 0x07;
  else
    return bad;
  if (i + n > text.size()) return bad;
  for (unsigned k = 1; k < n; ++k) {
    const unsigned char b = (unsigned char)text[i + k];
    if ((b & 0xc0) != 0x80) return bad;
    cp = (cp << 6) | (b & 0x3f);
  }
  if (cp >= 0x110000) return bad;
  return {cp, n, classes[cp]};
}

inline bool is_other(unsigned char cls) {
  return (cls & (kL | kN | kS)) == 0;
}
inline bool is_cr_or_lf(char32_t cp) {
  return cp == U'\r' || cp == U'\n';
}

// Case-insensitive (?i:'s|'t|'re|'ve|'m|'ll|'d) at text[i] (an apostrophe): its end, or 0.
// Under Unicode case folding 's' also matches U+017F LATIN SMALL LETTER LONG S.
size_t contraction_end(std::string_view text, size_t i, const unsigned char* classes) {
  const size_t n = text.size();
  if (i + 1 >= n) return 0;
  const Char a = char_at(text, i + 1, classes);
  const char32_t lower = a.cp < 0x80 ? (a.cp | 0x20) : a.cp;
  if (lower == U's' || a.cp == 0x17f || lower == U't' || lower == U'm' || lower == U'd')
    return i + 1 + a.length;
  if (i + 2 >= n || !(lower == U'r' || lower == U'v' || lower == U'l')) return 0;
  const char32_t b = (unsigned char)text[i + 2] | 0x20;
  if ((lower == U'l' && b == U'l') || (lower != U'l' && b == U'e')) return i + 3;
  return 0;
}

// The end of the run of characters from text[i] whose class has any of `bits` (`other`: none
// of L, N, S), at most `limit` characters.
template <bool kOther>
size_t run_end(std::string_view text, size_t i, unsigned char bits, const unsigned char* classes,
               size_t limit = (size_t)-1) {
  for (size_t count = 0; i < text.size() && count < limit; ++count) {
    const Char c = char_at(text, i, classes);
    if (kOther ? !is_other(c.cls) : !(c.cls & bits)) break;
    i += c.length;
  }
  return i;
}

// \s*[\r\n]+ | \s+(?!\S) | \s+ at a whitespace character text[i].
size_t whitespace_end(std::string_view text, size_t i, const unsigned char* classes) {
  size_t end = i, last_start = i, after_newline = 0;
  while (end < text.size()) {
    const Char c = char_at(text, end, classes);
    if (!(c.cls & kS)) break;
    last_start = end;
    end += c.length;
    if (is_cr_or_lf(c.cp)) after_newline = end;
  }
  if (after_newline) return after_newline;                // \s*[\r\n]+ ends at the last newline
  if (end == text.size() || last_start == i) return end;  // \s+(?!\S) at the end, or \s+
  return last_start;  // \s+(?!\S) gives the last space back to what follows
}

}  // namespace

std::unique_ptr<HfSplitScanner> HfSplitScanner::for_pattern(const std::string& pattern) {
  if (pattern == kLlama3SplitPattern) return std::make_unique<HfSplitScanner>(3);
  if (pattern == kQwenSplitPattern) return std::make_unique<HfSplitScanner>(1);
  return nullptr;
}

HfSplitScanner::HfSplitScanner(int max_digits)
    : max_digits_(max_digits), classes_(scanner_classes()) {}

size_t HfSplitScanner::match_end(std::string_view text, size_t i) const {
  const Char c = char_at(text, i, classes_);
  const size_t next = i + c.length;
  if (c.cp == U'\'')  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (size_t end = contraction_end(text, i, classes_)) return end;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (!(c.cls & (kL | kN)) && !is_cr_or_lf(c.cp) && next < text.size() &&
      (char_at(text, next, classes_).cls & kL))
    return run_end<false>(text, next, kL, classes_);
  if (c.cls & kL) return run_end<false>(text, next, kL, classes_);
  // \p{N}{1,3} (Llama 3) or \p{N} (Qwen)
  if (c.cls & kN) return run_end<false>(text, next, kN, classes_, max_digits_ - 1);
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  size_t start = i;
  if (c.cp == U' ' && next < text.size() && is_other(char_at(text, next, classes_).cls))
    start = next;
  if (is_other(char_at(text, start, classes_).cls)) {
    size_t end = run_end<true>(text, start, 0, classes_);
    while (end < text.size() && is_cr_or_lf((unsigned char)text[end])) ++end;
    return end;
  }
  return whitespace_end(text, i, classes_);
}

void HfSplitScanner::find_all(std::string_view text,
                              std::vector<std::pair<size_t, size_t>>* matches) const {
  for (size_t i = 0; i < text.size();) {
    const size_t end = match_end(text, i);
    matches->emplace_back(i, end);
    i = end;
  }
}

}  // namespace trident::tokenizer
