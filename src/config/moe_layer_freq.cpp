#include "config/moe_layer_freq.h"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace trident {

namespace {

// Longer lists than this are no model's layers. The bounds keep a hostile text cheap: no
// "[1]*999999999" allocated before its length is compared with --num-layers, no recursion
// deep enough to overflow the stack, no long chain of copies.
constexpr long kMaxEntries = 1L << 14;
constexpr size_t kMaxText = 1 << 14;
constexpr int kMaxDepth = 64;
constexpr long kMaxNumber = 1L << 40;

// An expression's value: an integer or a list of integers (Python's int and list).
struct Value {
  bool is_list = false;
  long number = 0;
  std::vector<long> items;
};

// Recursive descent over Python's precedence: expr = term {'+' term}, term = factor
// {'*' factor}, factor = integer | '(' expr ')' | '[' [expr {',' expr} [',']] ']'.
class PatternParser {
 public:
  explicit PatternParser(const std::string& text) : text_(text) {}

  Value parse() {
    if (text_.size() > kMaxText) fail("longer than " + std::to_string(kMaxText) + " characters");
    Value v = expression();
    skip_spaces();
    if (pos_ < text_.size()) fail("unexpected '" + std::string(1, text_[pos_]) + "'");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("--moe-layer-freq '" + text_ + "': " + what + " at character " +
                                std::to_string(pos_ + 1) +
                                " (expected an integer N or a list expression of 0s and 1s "
                                "such as \"([1]*3+[0]*1)*3\" or \"[1,0,1,0]\")");
  }
  void skip_spaces() {
    while (pos_ < text_.size() && std::isspace((unsigned char)text_[pos_])) ++pos_;
  }
  bool accept(char c) {
    skip_spaces();
    if (pos_ < text_.size() && text_[pos_] == c) return ++pos_, true;
    return false;
  }

  Value expression() {
    Value v = term();
    while (accept('+')) v = add(std::move(v), term());
    return v;
  }
  Value term() {
    Value v = factor();
    while (accept('*')) v = multiply(std::move(v), factor());
    return v;
  }
  Value factor() {
    skip_spaces();
    if (accept('(')) {
      Value v = nested([&] { return expression(); });
      if (!accept(')')) fail("expected ')'");
      return v;
    }
    if (accept('[')) return nested([&] { return list(); });
    if (pos_ < text_.size() && std::isdigit((unsigned char)text_[pos_])) return integer();
    fail(pos_ < text_.size() ? "unexpected '" + std::string(1, text_[pos_]) + "'"
                             : "unexpected end");
  }
  Value list() {
    Value v;
    v.is_list = true;
    if (accept(']')) return v;
    do {
      if (accept(']')) return v;  // a trailing comma, as Python allows
      const Value item = expression();
      if (item.is_list) fail("a list inside a list (each entry is one layer: 0 or 1)");
      v.items.push_back(item.number);
    } while (accept(','));
    if (!accept(']')) fail("expected ',' or ']'");
    return v;
  }
  Value integer() {
    Value v;
    while (pos_ < text_.size() && std::isdigit((unsigned char)text_[pos_])) {
      v.number = v.number * 10 + (text_[pos_++] - '0');
      if (v.number > kMaxNumber) fail("a number too large");
    }
    return v;
  }

  Value add(Value a, const Value& b) {
    if (a.is_list != b.is_list) fail("'+' between a list and a number");
    if (!a.is_list) {
      a.number += b.number;
      if (a.number > kMaxNumber) fail("a number too large");
      return a;
    }
    if ((long)(a.items.size() + b.items.size()) > kMaxEntries) fail("a list too long");
    a.items.insert(a.items.end(), b.items.begin(), b.items.end());
    return a;
  }
  // list * n and n * list repeat the list (Python's rule); n * m multiplies.
  Value multiply(const Value& a, const Value& b) {
    if (a.is_list && b.is_list) fail("'*' between two lists");
    if (!a.is_list && !b.is_list) {
      if (a.number != 0 && b.number > kMaxNumber / a.number) fail("a number too large");
      return Value{false, a.number * b.number, {}};
    }
    const Value& l = a.is_list ? a : b;
    const long times = a.is_list ? b.number : a.number;
    if (times > 0 && (long)l.items.size() > kMaxEntries / times) fail("a list too long");
    Value v;
    v.is_list = true;
    for (long i = 0; i < times; ++i) v.items.insert(v.items.end(), l.items.begin(), l.items.end());
    return v;
  }

  template <class F>
  Value nested(F parse_inside) {
    if (++depth_ > kMaxDepth) fail("brackets nested deeper than " + std::to_string(kMaxDepth));
    Value v = parse_inside();
    --depth_;
    return v;
  }

  const std::string& text_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// The integer form: digits alone, surrounded by spaces at most (Python's int()).
bool parse_plain_integer(const std::string& text, long& n) {
  size_t i = text.find_first_not_of(" \t");
  const size_t end = text.find_last_not_of(" \t");
  if (i == std::string::npos) return false;
  n = 0;
  for (; i <= end; ++i) {
    if (!std::isdigit((unsigned char)text[i])) return false;
    n = n * 10 + (text[i] - '0');
    if (n > kMaxNumber) return false;
  }
  return true;
}

}  // namespace

std::vector<long> evaluate_moe_layer_pattern(const std::string& text) {
  const Value v = PatternParser(text).parse();
  if (!v.is_list)
    throw std::invalid_argument("--moe-layer-freq '" + text +
                                "': the expression gives a number, not a list of layers");
  return v.items;
}

std::vector<bool> resolve_moe_layer_freq(const std::string& text, int num_layers) {
  std::vector<bool> moe((size_t)std::max(num_layers, 0));
  if (text.find('[') == std::string::npos) {  // Megatron's test for the list form
    long every = 0;
    if (!parse_plain_integer(text, every) || every < 1)
      throw std::invalid_argument("--moe-layer-freq '" + text +
                                  "': an integer N >= 1 (layer i is MoE iff i % N == 0) or a "
                                  "list expression such as \"([1]*3+[0]*1)*3\"");
    for (int i = 0; i < num_layers; ++i) moe[i] = i % every == 0;
    return moe;
  }
  const std::vector<long> pattern = evaluate_moe_layer_pattern(text);
  if ((long)pattern.size() != num_layers)
    throw std::invalid_argument("--moe-layer-freq '" + text + "' gives " +
                                std::to_string(pattern.size()) + " layers; --num-layers is " +
                                std::to_string(num_layers) + " (one entry per layer)");
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != 0 && pattern[i] != 1)
      throw std::invalid_argument("--moe-layer-freq '" + text + "': entry " + std::to_string(i) +
                                  " is " + std::to_string(pattern[i]) +
                                  "; each must be 1 (MoE layer) or 0 (dense layer)");
    moe[i] = pattern[i] == 1;
  }
  return moe;
}

}  // namespace trident
