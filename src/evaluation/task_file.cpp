#include "evaluation/task_file.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

#include "core/files.h"
#include "tokenizer/unicode_classes.h"

namespace trident::evaluation {

std::vector<RawDoc> parse_task_jsonl(std::string_view text, const std::string& path) {
  std::vector<RawDoc> docs;
  long number = 0;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::string where = path + ":" + std::to_string(number) + ": ";
    size_t bad = 0;
    if (!tokenizer::is_valid_utf8(line, &bad))
      throw FormatError(where + "not valid UTF-8 (byte " + std::to_string(bad + 1) + ")");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw FormatError(where + "invalid JSON: " + e.what());
    }
    if (!j.is_object()) throw FormatError(where + "expected a JSON object, got " + j.type_name());
    docs.push_back({std::move(j), number});
  }
  return docs;
}

std::vector<RawDoc> read_task_jsonl(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(path + ": cannot open (task data are read from local files)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_task_jsonl(ss.str(), path);
}

namespace {

class LiteralParser {
 public:
  explicit LiteralParser(std::string_view s) : s_(s) {}
  nlohmann::json document() {
    nlohmann::json v = value(0);
    skip();
    if (i_ != s_.size()) fail("unexpected text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    throw std::invalid_argument("Python literal, offset " + std::to_string(i_) + ": " + why);
  }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r'))
      ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }
  nlohmann::json value(int depth) {
    if (depth > 64) fail("nested too deeply");
    skip();
    if (i_ >= s_.size()) fail("unexpected end");
    const char c = s_[i_];
    if (c == '\'' || c == '"') return string();
    if (c == '[' || c == '(') return sequence(c == '[' ? ']' : ')', depth);
    if (c == '{') return mapping(depth);
    for (auto [word, v] : {std::pair<const char*, nlohmann::json>{"True", true},
                           {"False", false},
                           {"None", nullptr}})
      if (s_.substr(i_, std::string_view(word).size()) == word) {
        i_ += std::string_view(word).size();
        return v;
      }
    return number();
  }
  nlohmann::json number() {
    const size_t start = i_;
    if (i_ < s_.size() && (s_[i_] == '-' || s_[i_] == '+')) ++i_;
    bool real = false;
    while (i_ < s_.size() && (isdigit((unsigned char)s_[i_]) || s_[i_] == '.' || s_[i_] == 'e' ||
                              s_[i_] == 'E' || ((s_[i_] == '-' || s_[i_] == '+') && real))) {
      real |= s_[i_] == '.' || s_[i_] == 'e' || s_[i_] == 'E';
      ++i_;
    }
    const std::string text(s_.substr(start, i_ - start));
    if (text.empty() || text == "-" || text == "+") fail("expected a value");
    try {
      if (real) return std::stod(text);
      return std::stoll(text);
    } catch (const std::exception&) {
      fail("bad number '" + text + "'");
    }
  }
  void append_utf8(unsigned long cp, std::string* out) {
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) fail("bad escape code point");
    tokenizer::append_utf8((char32_t)cp, out);
  }
  unsigned long hex(int digits) {
    if (i_ + digits > s_.size()) fail("short escape");
    unsigned long v = 0;
    for (int k = 0; k < digits; ++k) {
      const char h = s_[i_++];
      if (!isxdigit((unsigned char)h)) fail("bad hex digit in an escape");
      v = v * 16 + (unsigned long)(isdigit((unsigned char)h) ? h - '0' : (tolower(h) - 'a' + 10));
    }
    return v;
  }
  nlohmann::json string() {
    const char quote = s_[i_++];
    std::string out;
    for (;;) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == quote) break;
      if (c == '\n') fail("newline inside a string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case 'n':
          out.push_back('\n');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case '\n':
          break;
        case 'x':
          append_utf8(hex(2), &out);
          break;
        case 'u':
          append_utf8(hex(4), &out);
          break;
        case 'U':
          append_utf8(hex(8), &out);
          break;
        default:
          out.push_back('\\'), out.push_back(e);  // Python keeps unknown escapes
      }
    }
    if (!tokenizer::is_valid_utf8(out)) fail("string is not valid UTF-8");
    return out;
  }
  nlohmann::json sequence(char close, int depth) {
    ++i_;
    nlohmann::json list = nlohmann::json::array();
    while (!eat(close)) {
      list.push_back(value(depth + 1));
      if (!eat(',')) {
        if (!eat(close)) fail(std::string("expected ',' or '") + close + "'");
        break;
      }
    }
    return list;
  }
  nlohmann::json mapping(int depth) {
    ++i_;
    nlohmann::json map = nlohmann::json::object();
    while (!eat('}')) {
      nlohmann::json key = value(depth + 1);
      if (!key.is_string()) fail("dict keys must be strings here");
      if (!eat(':')) fail("expected ':'");
      map[key.get<std::string>()] = value(depth + 1);
      if (!eat(',')) {
        if (!eat('}')) fail("expected ',' or '}'");
        break;
      }
    }
    return map;
  }
  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

nlohmann::json parse_python_literal(std::string_view text) {
  return LiteralParser(text).document();
}

}  // namespace trident::evaluation
