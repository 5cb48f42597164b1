#include "tokenizer/pretokenize.h"

#include "tokenizer/unicode_classes.h"

namespace trident::tokenizer {

namespace {

struct Scanner {
  std::string_view text;
  std::vector<char32_t> cps;    // code points
  std::vector<size_t> offsets;  // byte offset of each code point, plus the end
  std::vector<std::uint8_t> cls;
  std::uint8_t space_bit;

  bool is_space(size_t i) const { return cls[i] & space_bit; }
  bool is_letter(size_t i) const { return cls[i] & kLetter; }
  bool is_number(size_t i) const { return cls[i] & kNumber; }
  bool is_other(size_t i) const { return !is_space(i) && !is_letter(i) && !is_number(i); }
};

// Length in code points of the contraction at i, or 0.
size_t contraction(const Scanner& s, size_t i) {
  const size_t n = s.cps.size();
  if (s.cps[i] != U'\'' || i + 1 >= n) return 0;
  char32_t a = s.cps[i + 1];
  if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
  char32_t b = i + 2 < n ? s.cps[i + 2] : 0;
  if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
  return 0;
}

// " ?X+" for a class predicate: length matched at i, or 0.
template <typename Pred>
size_t optional_space_run(const Scanner& s, size_t i, Pred in_class) {
  const size_t n = s.cps.size();
  size_t j = i;
  if (s.cps[j] == U' ' && j + 1 < n && in_class(j + 1)) ++j;
  if (!in_class(j)) return 0;
  while (j < n && in_class(j)) ++j;
  return j - i;
}

size_t whitespace(const Scanner& s, size_t i) {
  const size_t n = s.cps.size();
  size_t j = i;
  while (j < n && s.is_space(j)) ++j;
  size_t run = j - i;
  if (run == 0) return 0;
  // \s+(?!\S): give back the last space when a non-space follows, keeping at least one;
  // with a single space before a non-space, the plain \s+ alternative takes it.
  if (j < n && run > 1) return run - 1;
  return run;
}

size_t match_at(const Scanner& s, size_t i) {
  if (size_t k = contraction(s, i)) return k;
  if (size_t k = optional_space_run(s, i, [&](size_t p) { return s.is_letter(p); })) return k;
  if (size_t k = optional_space_run(s, i, [&](size_t p) { return s.is_number(p); })) return k;
  if (size_t k = optional_space_run(s, i, [&](size_t p) { return s.is_other(p); })) return k;
  return whitespace(s, i);
}

}  // namespace

void pretokenize(std::string_view text, bool js_whitespace, std::vector<Piece>* pieces) {
  const UnicodeClasses& classes = UnicodeClasses::instance();
  thread_local Scanner s;
  s.text = text;
  s.cps.clear();
  s.offsets.clear();
  s.cls.clear();
  s.space_bit = js_whitespace ? kJsSpace : kSpace;
  for (size_t i = 0; i < text.size();) {
    char32_t cp;
    int len = decode_utf8(text, i, &cp);
    if (len == 0) cp = 0xfffd, len = 1;  // callers validate first; never loop forever
    s.cps.push_back(cp);
    s.offsets.push_back(i);
    s.cls.push_back(classes.of(cp));
    i += len;
  }
  s.offsets.push_back(text.size());
  pieces->clear();
  for (size_t i = 0; i < s.cps.size();) {
    size_t k = match_at(s, i);
    if (k == 0) k = 1;  // unreachable: every code point is space, letter, number or other
    pieces->push_back({s.offsets[i], s.offsets[i + k]});
    i += k;
  }
}

}  // namespace trident::tokenizer
