#include "chat_template/lexer.h"

#include <cstring>

#include "chat_template/value.h"

namespace trident::chat_template {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_name_start(char c) {
  return std::isalpha((unsigned char)c) || c == '_';
}
bool is_name_char(char c) {
  return std::isalnum((unsigned char)c) || c == '_';
}

std::string normalise_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline = False
  return out;
}

void append_utf8(std::string& out, unsigned code) {
  if (code < 0x80) {
    out += char(code);
  } else if (code < 0x800) {
    out += char(0xC0 | code >> 6);
    out += char(0x80 | (code & 0x3F));
  } else if (code < 0x10000) {
    out += char(0xE0 | code >> 12);
    out += char(0x80 | (code >> 6 & 0x3F));
    out += char(0x80 | (code & 0x3F));
  } else {
    out += char(0xF0 | code >> 18);
    out += char(0x80 | (code >> 12 & 0x3F));
    out += char(0x80 | (code >> 6 & 0x3F));
    out += char(0x80 | (code & 0x3F));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string source) : s_(normalise_newlines(source)) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      const size_t tag = next_tag(pos_);
      std::string text = s_.substr(pos_, tag - pos_);
      if (tag == s_.size()) {
        emit(TokenType::kData, text);
        pos_ = tag;
        break;
      }
      const char kind = s_[tag + 1];  // '{', '%' or '#'
      const char control = tag + 2 < s_.size() ? s_[tag + 2] : 0;
      strip_before(text, kind, control);
      emit(TokenType::kData, text);
      line_ += count_lines(pos_, tag);
      pos_ = tag + 2 + (control == '-' || control == '+');
      if (kind == '#') {
        comment();
      } else if (kind == '%' && raw_block()) {
      } else {
        tag_body(kind);
      }
    }
    tokens_.push_back({TokenType::kEnd, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t next_tag(size_t from) const {
    for (size_t i = from; i + 1 < s_.size(); ++i)
      if (s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    return s_.size();
  }

  int count_lines(size_t from, size_t to) const {
    int n = 0;
    for (size_t i = from; i < to; ++i) n += s_[i] == '\n';
    return n;
  }

  // `-` strips all whitespace before the tag; otherwise lstrip_blocks strips the spaces
  // and tabs between the line's start and a block or comment tag, if that is all there is.
  void strip_before(std::string& text, char kind, char control) const {
    if (control == '-') {
      size_t end = text.size();
      while (end > 0 && is_space(text[end - 1])) --end;
      text.resize(end);
      return;
    }
    if (control == '+' || kind == '{') return;
    const size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (line_start == 0 && !line_starting_) return;
    if (line_start == text.size()) return;
    for (size_t i = line_start; i < text.size(); ++i)
      if (!is_space(text[i])) return;
    text.resize(line_start);
  }

  void emit(TokenType type, std::string text) {
    if (type == TokenType::kData && text.empty()) return;
    tokens_.push_back({type, std::move(text), line_});
  }

  // After a closing tag: `-` eats all whitespace, `+` nothing, and trim_blocks one newline
  // after a block or comment tag.
  void strip_after(char control, bool block_like) {
    const size_t start = pos_;
    if (control == '-') {
      while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
    } else if (control != '+' && block_like && pos_ < s_.size() && s_[pos_] == '\n') {
      ++pos_;
    }
    line_ += count_lines(start, pos_);
    line_starting_ = pos_ > 0 && s_[pos_ - 1] == '\n';
  }

  void comment() {
    const size_t end = s_.find("#}", pos_);
    if (end == std::string::npos)
      throw TemplateError("line " + std::to_string(line_) + ": missing end of comment tag");
    const char control = end > pos_ ? s_[end - 1] : 0;
    line_ += count_lines(pos_, end);
    pos_ = end + 2;
    strip_after(control == '-' || control == '+' ? control : 0, true);
  }

  size_t skip_spaces(size_t i) const {
    while (i < s_.size() && is_space(s_[i])) ++i;
    return i;
  }

  // {% raw %}...{% endraw %}: the text between, untouched (Jinja's raw_begin, which takes
  // no trim_blocks newline, and raw_end, which does).
  bool raw_block() {
    size_t i = skip_spaces(pos_);
    if (s_.compare(i, 3, "raw") != 0 || (i + 3 < s_.size() && is_name_char(s_[i + 3])))
      return false;
    i = skip_spaces(i + 3);
    const bool strip = i < s_.size() && s_[i] == '-';
    if (s_.compare(i + strip, 2, "%}") != 0)
      throw TemplateError("line " + std::to_string(line_) + ": a raw tag holds nothing but 'raw'");
    size_t body = i + strip + 2;
    if (strip) body = skip_spaces(body);
    for (size_t open = s_.find("{%", body); open != std::string::npos;
         open = s_.find("{%", open + 2)) {
      size_t k = open + 2;
      const char control = k < s_.size() && (s_[k] == '-' || s_[k] == '+') ? s_[k++] : 0;
      k = skip_spaces(k);
      if (s_.compare(k, 6, "endraw") != 0) continue;
      k = skip_spaces(k + 6);
      const char end_control = k < s_.size() && (s_[k] == '-' || s_[k] == '+') ? s_[k++] : 0;
      if (s_.compare(k, 2, "%}") != 0) continue;
      std::string text = s_.substr(body, open - body);
      strip_before(text, '%', control);
      emit(TokenType::kData, text);
      line_ += count_lines(pos_, k);
      pos_ = k + 2;
      strip_after(end_control, true);
      return true;
    }
    throw TemplateError("line " + std::to_string(line_) + ": missing end of raw directive");
  }

  void tag_body(char kind) {
    const bool block = kind == '%';
    emit(block ? TokenType::kBlockBegin : TokenType::kVarBegin, "");
    int depth = 0;
    for (;;) {
      while (pos_ < s_.size() && is_space(s_[pos_])) line_ += s_[pos_++] == '\n';
      if (pos_ >= s_.size())
        throw TemplateError("line " + std::to_string(line_) + ": unexpected end of template in a " +
                            (block ? "block tag" : "variable tag"));
      if (depth == 0 && closes(block)) return;
      expression_token(depth);
    }
  }

  bool closes(bool block) {
    const char* end = block ? "%}" : "}}";
    for (const char control : {'-', '+', '\0'}) {
      if (control == '+' && !block) continue;
      const size_t at = pos_ + (control ? 1 : 0);
      if (control && s_[pos_] != control) continue;
      if (s_.compare(at, 2, end) != 0) continue;
      pos_ = at + 2;
      emit(block ? TokenType::kBlockEnd : TokenType::kVarEnd, "");
      strip_after(control, block);
      return true;
    }
    return false;
  }

  void expression_token(int& depth) {
    const char c = s_[pos_];
    if (is_name_start(c)) {
      const size_t start = pos_;
      while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
      emit(TokenType::kName, s_.substr(start, pos_ - start));
    } else if (std::isdigit((unsigned char)c)) {
      number();
    } else if (c == '\'' || c == '"') {
      string_literal(c);
    } else {
      operator_token(depth);
    }
  }

  void number() {
    const size_t start = pos_;
    bool is_float = false;
    while (pos_ < s_.size() && (std::isdigit((unsigned char)s_[pos_]) || s_[pos_] == '_')) ++pos_;
    if (pos_ + 1 < s_.size() && s_[pos_] == '.' && std::isdigit((unsigned char)s_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      while (pos_ < s_.size() && (std::isdigit((unsigned char)s_[pos_]) || s_[pos_] == '_')) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      size_t e = pos_ + 1;
      if (e < s_.size() && (s_[e] == '+' || s_[e] == '-')) ++e;
      if (e < s_.size() && std::isdigit((unsigned char)s_[e])) {
        is_float = true;
        pos_ = e;
        while (pos_ < s_.size() && std::isdigit((unsigned char)s_[pos_])) ++pos_;
      }
    }
    std::string text;
    for (size_t i = start; i < pos_; ++i)
      if (s_[i] != '_') text += s_[i];
    emit(is_float ? TokenType::kFloat : TokenType::kInteger, text);
  }

  unsigned hex_digits(int n) {
    unsigned value = 0;
    for (int i = 0; i < n; ++i, ++pos_) {
      if (pos_ >= s_.size() || !std::isxdigit((unsigned char)s_[pos_]))
        throw TemplateError("line " + std::to_string(line_) + ": a bad escape in a string literal");
      value = value * 16 + std::stoi(std::string(1, s_[pos_]), nullptr, 16);
    }
    return value;
  }

  // Python's string escapes, as Jinja decodes its literals.
  void string_literal(char quote) {
    ++pos_;
    std::string out;
    for (;;) {
      if (pos_ >= s_.size())
        throw TemplateError("line " + std::to_string(line_) + ": unterminated string literal");
      const char c = s_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        line_ += c == '\n';
        out += c;
        continue;
      }
      const char e = pos_ < s_.size() ? s_[pos_++] : 0;
      switch (e) {
        case 'n':
          out += '\n';
          break;
        case 't':
          out += '\t';
          break;
        case 'r':
          out += '\r';
          break;
        case '0':
          out += '\0';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'v':
          out += '\v';
          break;
        case '\\':
        case '\'':
        case '"':
          out += e;
          break;
        case '\n':
          break;
        case 'x':
          append_utf8(out, hex_digits(2));
          break;
        case 'u':
          append_utf8(out, hex_digits(4));
          break;
        case 'U':
          append_utf8(out, hex_digits(8));
          break;
        default:
          out += '\\';
          out += e;
      }
    }
    emit(TokenType::kString, out);
  }

  void operator_token(int& depth) {
    static const char* const kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwo)
      if (s_.compare(pos_, 2, op) == 0) {
        emit(TokenType::kOperator, op);
        pos_ += 2;
        return;
      }
    const char c = s_[pos_];
    if (!std::strchr("+-*/%~<>=.,:|()[]{}", c))
      throw TemplateError("line " + std::to_string(line_) + ": unexpected character '" +
                          std::string(1, c) + "' in a tag");
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    emit(TokenType::kOperator, std::string(1, c));
    ++pos_;
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize_template(const std::string& source) {
  return Lexer(source).run();
}

}  // namespace trident::chat_template
