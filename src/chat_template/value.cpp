#include "chat_template/value.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace trident::chat_template {

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  for (auto& [k, v] : items)
    if (k == key) {
      v = std::move(value);
      return;
    }
  items.emplace_back(key, std::move(value));
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value::Value(bool b) : kind_(Kind::kBool), b_(b), i_(b) {}
Value::Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
Value::Value(double d) : kind_(Kind::kFloat), d_(d) {}
Value::Value(std::string s)
    : kind_(Kind::kString), s_(std::make_shared<const std::string>(std::move(s))) {}
Value::Value(List list)
    : kind_(Kind::kList), list_(std::make_shared<const List>(std::move(list))) {}
Value::Value(Dict dict) : kind_(Kind::kDict), dict_(std::make_shared<Dict>(std::move(dict))) {}

Value Value::tuple(List items) {
  Value v(std::move(items));
  v.tuple_ = true;
  return v;
}

Value Value::namespace_of(Dict attributes) {
  Value v(std::move(attributes));
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::function(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.s_ = std::make_shared<const std::string>(std::move(name));
  v.fn_ = std::make_shared<const Function>(std::move(fn));
  return v;
}

Value Value::undefined(std::string name) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(name));
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value(int64_t(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List list;
      for (const auto& e : j) list.push_back(from_json(e));
      return Value(std::move(list));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict dict;
      for (const auto& [k, v] : j.items()) dict.items.emplace_back(k, from_json(v));
      return Value(std::move(dict));
    }
    default:
      throw TemplateError("a JSON value of an unsupported type (binary)");
  }
}

const std::string& Value::name() const {
  static const std::string none;
  return (kind_ == Kind::kUndefined || kind_ == Kind::kFunction) && s_ ? *s_ : none;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return d_ != 0;
    case Kind::kString:
      return !s_->empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->items.empty();
    default:
      return true;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    default:
      return "function";
  }
}

std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  // Shortest round-trip digits and their decimal exponent, then Python's layout: fixed
  // notation for exponents in [-4, 16), scientific with a 2-digit exponent otherwise.
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, end);
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa)
    if (c != '.') digits += c;
  std::string out;
  if (exponent >= -4 && exponent < 16) {
    const int point = exponent + 1;  // digits before the decimal point
    if (point <= 0) {
      out = "0." + std::string(-point, '0') + digits;
    } else if (point >= (int)digits.size()) {
      out = digits + std::string(point - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, point) + "." + digits.substr(point);
    }
  } else {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    std::snprintf(buf, sizeof buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += buf;
  }
  return negative ? "-" + out : out;
}

namespace {

std::string python_string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const char quote = has_single && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\' || c == quote) {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out + quote;
}

}  // namespace

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return *s_;
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      return python_float(d_);
    case Kind::kString:
      return python_string_repr(*s_);
    case Kind::kList: {
      std::string out = tuple_ ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].repr();
      if (tuple_ && list_->size() == 1) out += ",";
      return out + (tuple_ ? ")" : "]");
    }
    case Kind::kDict: {
      std::string out = "{";
      for (size_t i = 0; i < dict_->items.size(); ++i)
        out += (i ? ", " : "") + python_string_repr(dict_->items[i].first) + ": " +
               dict_->items[i].second.repr();
      return out + "}";
    }
    case Kind::kNamespace:
      return "<Namespace>";
    default:
      return "<function " + *s_ + ">";
  }
}

bool operator==(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() || a.kind() == K::kBool) {
    if (!(b.is_number() || b.kind() == K::kBool)) return false;
    if (a.kind() == K::kFloat || b.kind() == K::kFloat) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kString:
      return a.as_string() == b.as_string();
    case K::kList:
      return a.as_list() == b.as_list();
    case K::kDict: {
      const Dict &x = a.as_dict(), &y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.find(k);
        if (!other || !(*other == v)) return false;
      }
      return true;
    }
    case K::kNamespace:
      return &a.namespace_attributes() == &b.namespace_attributes();
    case K::kFunction:
      return &a.as_function() == &b.as_function();
    default:
      return true;  // None == None, Undefined == Undefined
  }
}

bool less_than(const Value& a, const Value& b) {
  using K = Value::Kind;
  const bool a_num = a.is_number() || a.kind() == K::kBool;
  const bool b_num = b.is_number() || b.kind() == K::kBool;
  if (a_num && b_num) return a.as_double() < b.as_double();
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // code points
  if (a.is_list() && b.is_list()) {
    const List &x = a.as_list(), &y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (less_than(x[i], y[i])) return true;
      if (less_than(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  throw TemplateError("'<' not supported between instances of '" + a.type_name() + "' and '" +
                      b.type_name() + "'");
}

Value CallArgs::get(size_t i, const std::string& name, Value fallback) {
  if (consumed_keyword.size() != keyword.size()) consumed_keyword.assign(keyword.size(), false);
  if (i < positional.size()) {
    consumed_positional = std::max(consumed_positional, i + 1);
    return positional[i];
  }
  for (size_t k = 0; k < keyword.size(); ++k)
    if (keyword[k].first == name) {
      consumed_keyword[k] = true;
      return keyword[k].second;
    }
  return fallback;
}

void CallArgs::expect_no_more() const {
  if (consumed_positional < positional.size())
    throw TemplateError(callee + "() takes " + std::to_string(consumed_positional) +
                        " positional arguments but " + std::to_string(positional.size()) +
                        " were given");
  for (size_t k = 0; k < keyword.size(); ++k)
    if (k >= consumed_keyword.size() || !consumed_keyword[k])
      throw TemplateError(callee + "() got an unexpected keyword argument '" + keyword[k].first +
                          "'");
}

int64_t parse_int64(const std::string& digits) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(digits.c_str(), &end, 10);
  if (errno == ERANGE || end == digits.c_str() || *end != 0)
    throw TemplateError("the integer " + digits.substr(0, 40) + " does not fit 64 bits");
  return v;
}

int64_t truncate_to_int64(double d) {
  if (!(d > -9.2233720368547758e18 && d < 9.2233720368547758e18))
    throw TemplateError("the float " + python_float(d) + " does not fit a 64-bit integer");
  return (int64_t)d;
}

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace trident::chat_template
