#include "evaluation/text_ops.h"

#include <unicode/uchar.h>

#include <algorithm>

#include "tokenizer/unicode_classes.h"

namespace trident::evaluation {

namespace {

// One code point at s[i] (invalid bytes read as themselves, one at a time).
char32_t decode_at(std::string_view s, size_t i, size_t* len) {
  const unsigned char c = (unsigned char)s[i];
  int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (i + n > s.size()) n = 1;
  char32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
  for (int k = 1; k < n; ++k) cp = (cp << 6) | ((unsigned char)s[i + k] & 0x3f);
  *len = (size_t)n;
  return cp;
}

// Length of the whitespace run starting at i (0 when none).
size_t space_run(std::string_view s, size_t i) {
  size_t start = i, len = 0;
  while (i < s.size() && is_python_space(decode_at(s, i, &len))) i += len;
  return i - start;
}

// re.sub(open \s*([^close]*?)\s* close, open \1 close): whitespace just inside each pair
// dropped, pairs taken left to right without overlap.
std::string tighten_pairs(std::string_view s, char open, char close) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t a = s.find(open, i);
    if (a == std::string_view::npos) break;
    const size_t b = s.find(close, a + 1);
    if (b == std::string_view::npos) break;
    out.append(s.substr(i, a - i));
    out.push_back(open);
    out += python_strip(s.substr(a + 1, b - a - 1));
    out.push_back(close);
    i = b + 1;
  }
  out.append(s.substr(std::min(i, s.size())));
  return out;
}

}  // namespace

bool is_python_space(char32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85) return true;
  if (c < 0x80) return false;
  // CPython: bidirectional class WS, B or S, or general category Zs.
  const int bidi = u_charDirection((UChar32)c);
  return u_charType((UChar32)c) == U_SPACE_SEPARATOR || bidi == U_WHITE_SPACE_NEUTRAL ||
         bidi == U_BLOCK_SEPARATOR || bidi == U_SEGMENT_SEPARATOR;
}

std::string python_lstrip(std::string_view s) {
  return std::string(s.substr(space_run(s, 0)));
}

std::string python_rstrip(std::string_view s) {
  size_t end = 0, i = 0, len = 0;
  while (i < s.size()) {
    const char32_t c = decode_at(s, i, &len);
    i += len;
    if (!is_python_space(c)) end = i;
  }
  return std::string(s.substr(0, end));
}

std::string python_strip(std::string_view s) {
  return python_rstrip(python_lstrip(s));
}

std::string python_capitalize(std::string_view s) {
  std::string out;
  size_t i = 0, len = 0;
  for (bool first = true; i < s.size(); first = false) {
    const char32_t c = decode_at(s, i, &len);
    i += len;
    tokenizer::append_utf8((char32_t)(first ? u_totitle((UChar32)c) : u_tolower((UChar32)c)), &out);
  }
  return out;
}

long code_points(std::string_view s) {
  long n = 0;
  for (size_t i = 0, len = 0; i < s.size(); i += len, ++n) decode_at(s, i, &len);
  return n;
}

std::string python_slice(std::string_view s, long start, long stop) {
  const long n = code_points(s);
  auto clamp = [n](long i) { return std::clamp(i < 0 ? i + n : i, 0L, n); };
  start = clamp(start), stop = clamp(stop);
  size_t from = s.size(), to = s.size();
  long index = 0;
  for (size_t i = 0, len = 0; i < s.size(); i += len, ++index) {
    if (index == start) from = i;
    if (index == stop) to = i;
    decode_at(s, i, &len);
  }
  return stop > start ? std::string(s.substr(from, to - from)) : std::string();
}

long python_word_count(std::string_view s) {
  long runs = 0;
  for (size_t i = 0, len = 0; i < s.size();) {
    const size_t run = space_run(s, i);
    if (run) {
      ++runs, i += run;
    } else {
      decode_at(s, i, &len);
      i += len;
    }
  }
  return runs + 1;
}

std::vector<std::string> split_on(std::string_view s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) {
      parts.emplace_back(s.substr(start, i - start));
      start = i + 1;
    }
  return parts;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep, size_t first,
                 size_t last) {
  std::string out;
  for (size_t i = first; i < last; ++i) {
    if (i > first) out += sep;
    out += parts[i];
  }
  return out;
}

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  std::string out;
  size_t i = 0;
  for (size_t at; (at = s.find(from, i)) != std::string::npos; i = at + from.size()) {
    out.append(s, i, at - i);
    out += to;
  }
  out.append(s, i, std::string::npos);
  return out;
}

std::string hellaswag_preprocess(std::string_view text) {
  std::string s = replace_all(python_strip(text), " [title]", ". ");
  // re.sub(r"\[.*?\]", ""): '.' stops at a newline, so a '[' closes only on its own line.
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '[') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != ']' && s[j] != '\n') ++j;
      if (j < s.size() && s[j] == ']') {
        i = j + 1;
        continue;
      }
    }
    out.push_back(s[i++]);
  }
  return replace_all(out, "  ", " ");
}

std::string wikitext_detokenize(std::string_view page) {
  std::string s = replace_all(std::string(page), "s '", "s'");
  // re.sub(r"/' [0-9]/", r"/'[0-9]/"): the harness replaces with the literal text.
  {
    std::string out;
    size_t i = 0;
    for (size_t at; (at = s.find("/' ", i)) != std::string::npos;) {
      if (at + 4 < s.size() && s[at + 3] >= '0' && s[at + 3] <= '9' && s[at + 4] == '/') {
        out.append(s, i, at - i);
        out += "/'[0-9]/";
        i = at + 5;
      } else {
        out.append(s, i, at + 1 - i);
        i = at + 1;
      }
    }
    out.append(s, i, std::string::npos);
    s = out;
  }
  s = replace_all(s, " @-@ ", "-");
  s = replace_all(s, " @,@ ", ",");
  s = replace_all(s, " @.@ ", ".");
  s = replace_all(s, " : ", ": ");
  s = replace_all(s, " ; ", "; ");
  s = replace_all(s, " . ", ". ");
  s = replace_all(s, " ! ", "! ");
  s = replace_all(s, " ? ", "? ");
  s = replace_all(s, " , ", ", ");
  s = tighten_pairs(s, '(', ')');
  s = tighten_pairs(s, '[', ']');
  s = tighten_pairs(s, '{', '}');
  s = tighten_pairs(s, '"', '"');
  s = tighten_pairs(s, '\'', '\'');
  s = replace_all(s, "= = = =", "====");
  s = replace_all(s, "= = =", "===");
  s = replace_all(s, "= =", "==");
  s = replace_all(s, " \xc2\xb0 ", "\xc2\xb0");
  s = replace_all(s, " \n", "\n");
  s = replace_all(s, "\n ", "\n");
  s = replace_all(s, " N ", " 1 ");
  s = replace_all(s, " 's", "'s");
  return s;
}

}  // namespace trident::evaluation
