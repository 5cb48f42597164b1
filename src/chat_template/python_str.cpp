#include "chat_template/python_str.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "chat_template/value.h"

namespace trident::chat_template {
namespace {

std::vector<UChar32> decode(const std::string& s) {
  std::vector<UChar32> out;
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(s);
  for (int32_t i = 0; i < u.length(); i = u.moveIndex32(i, 1)) out.push_back(u.char32At(i));
  return out;
}

std::string encode(const std::vector<UChar32>& cps) {
  icu::UnicodeString u;
  for (UChar32 c : cps) u.append(c);
  std::string out;
  u.toUTF8String(out);
  return out;
}

}  // namespace

bool is_python_space(unsigned c) {
  // str.isspace(): bidirectional class WS, B or S, or category Zs (Python's definition).
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return true;
  if (c < 0x80) return false;
  const int32_t bidi = u_charDirection(c);
  return u_charType(c) == U_SPACE_SEPARATOR || bidi == U_WHITE_SPACE_NEUTRAL ||
         bidi == U_BLOCK_SEPARATOR || bidi == U_SEGMENT_SEPARATOR;
}

std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right) {
  std::vector<UChar32> cps = decode(s);
  std::vector<UChar32> set;
  if (chars) set = decode(*chars);
  auto strippable = [&](UChar32 c) {
    return chars ? std::find(set.begin(), set.end(), c) != set.end() : is_python_space(c);
  };
  size_t begin = 0, end = cps.size();
  while (left && begin < end && strippable(cps[begin])) ++begin;
  while (right && end > begin && strippable(cps[end - 1])) --end;
  return encode({cps.begin() + begin, cps.begin() + end});
}

namespace {

std::vector<std::string> split_whitespace(const std::string& s, long maxsplit, bool from_right) {
  std::vector<UChar32> cps = decode(s);
  std::vector<std::string> out;
  if (from_right) std::reverse(cps.begin(), cps.end());
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && is_python_space(cps[i])) ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && (long)out.size() == maxsplit) {  // the rest, as it stands
      std::vector<UChar32> rest(cps.begin() + i, cps.end());
      if (from_right) std::reverse(rest.begin(), rest.end());
      out.push_back(encode(rest));
      break;
    }
    size_t j = i;
    while (j < cps.size() && !is_python_space(cps[j])) ++j;
    std::vector<UChar32> word(cps.begin() + i, cps.begin() + j);
    if (from_right) std::reverse(word.begin(), word.end());
    out.push_back(encode(word));
    i = j;
  }
  if (from_right) std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<std::string> py_split(const std::string& s, const std::string* sep, long maxsplit,
                                  bool from_right) {
  if (!sep) return split_whitespace(s, maxsplit, from_right);
  if (sep->empty()) throw TemplateError("empty separator");
  std::vector<std::string> out;
  if (!from_right) {
    size_t start = 0;
    for (size_t at; (maxsplit < 0 || (long)out.size() < maxsplit) &&
                    (at = s.find(*sep, start)) != std::string::npos;
         start = at + sep->size())
      out.push_back(s.substr(start, at - start));
    out.push_back(s.substr(start));
    return out;
  }
  size_t end = s.size();
  while (maxsplit < 0 || (long)out.size() < maxsplit) {
    if (end < sep->size()) break;
    const size_t at = s.rfind(*sep, end - sep->size());
    if (at == std::string::npos) break;
    out.push_back(s.substr(at + sep->size(), end - at - sep->size()));
    end = at;
  }
  out.push_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& with,
                       long count) {
  if (old.empty()) {  // Python inserts `with` between every code point, and at both ends
    std::string out;
    long done = 0;
    for (const std::string& cp : code_points(s)) {
      if (count < 0 || done < count) out += with, ++done;
      out += cp;
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  std::string out;
  size_t start = 0;
  long done = 0;
  for (size_t at; (count < 0 || done < count) && (at = s.find(old, start)) != std::string::npos;
       ++done) {
    out += s.substr(start, at - start) + with;
    start = at + old.size();
  }
  return out + s.substr(start);
}

std::string py_upper(const std::string& s) {
  std::string out;
  icu::UnicodeString::fromUTF8(s).toUpper(icu::Locale::getRoot()).toUTF8String(out);
  return out;
}

std::string py_lower(const std::string& s) {
  std::string out;
  icu::UnicodeString::fromUTF8(s).toLower(icu::Locale::getRoot()).toUTF8String(out);
  return out;
}

// Python's title(): a cased character after an uncased one starts a word.
std::string py_title(const std::string& s) {
  std::vector<UChar32> out;
  bool previous_cased = false;
  for (UChar32 c : decode(s)) {
    out.push_back(previous_cased ? u_tolower(c) : u_totitle(c));
    previous_cased = u_hasBinaryProperty(c, UCHAR_CASED);
  }
  return encode(out);
}

std::string py_capitalize(const std::string& s) {
  std::vector<UChar32> cps = decode(s);
  for (size_t i = 0; i < cps.size(); ++i) cps[i] = i == 0 ? u_totitle(cps[i]) : u_tolower(cps[i]);
  return encode(cps);
}

long py_find(const std::string& s, const std::string& sub, bool from_right) {
  const size_t at = from_right ? s.rfind(sub) : s.find(sub);
  if (at == std::string::npos) return -1;
  return (long)code_points(s.substr(0, at)).size();
}

long py_count(const std::string& s, const std::string& sub) {
  if (sub.empty()) return (long)code_points(s).size() + 1;
  long n = 0;
  for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

}  // namespace trident::chat_template
