// Jinja's tests, the globals HF's chat templates see, and json.dumps for tojson.
#include <cmath>
#include <cstdio>
#include <ctime>

#include "chat_template/builtins.h"

namespace trident::chat_template {
namespace {

bool is_integer(const Value& v) {
  return v.kind() == Value::Kind::kInt;
}

bool compare_test(const std::string& name, const Value& v, CallArgs& args, bool& result) {
  static const char* const kNames[] = {"eq", "equalto", "==", "ne", "!=", "lt",     "<", "le",
                                       "<=", "gt",      ">",  "ge", ">=", "sameas", "in"};
  bool known = false;
  for (const char* n : kNames) known |= name == n;
  if (!known) return false;
  Value other = args.get(0, "other");
  if (name == "eq" || name == "equalto" || name == "==")
    result = v == other;
  else if (name == "ne" || name == "!=")
    result = !(v == other);
  else if (name == "lt" || name == "<")
    result = less_than(v, other);
  else if (name == "le" || name == "<=")
    result = !less_than(other, v);
  else if (name == "gt" || name == ">")
    result = less_than(other, v);
  else if (name == "ge" || name == ">=")
    result = !less_than(v, other);
  else if (name == "sameas")
    result =
        v.kind() == other.kind() && (v.is_none() || v.kind() == Value::Kind::kBool) && v == other;
  else
    result = contains(other, v);
  return true;
}

}  // namespace

bool apply_test(const std::string& name, const Value& v, CallArgs& args) {
  using K = Value::Kind;
  args.callee = "test " + name;
  bool result = false;
  if (compare_test(name, v, args, result)) {
  } else if (name == "defined")
    result = !v.is_undefined();
  else if (name == "undefined")
    result = v.is_undefined();
  else if (name == "none")
    result = v.is_none();
  else if (name == "boolean")
    result = v.kind() == K::kBool;
  else if (name == "true")
    result = v.kind() == K::kBool && v.as_bool();
  else if (name == "false")
    result = v.kind() == K::kBool && !v.as_bool();
  else if (name == "integer")
    result = is_integer(v);
  else if (name == "float")
    result = v.kind() == K::kFloat;
  else if (name == "number")
    result = v.is_number() || v.kind() == K::kBool;
  else if (name == "string")
    result = v.is_string();
  else if (name == "mapping")
    result = v.is_mapping();
  else if (name == "sequence")
    result = v.is_list() || v.is_string() || v.kind() == K::kDict;
  else if (name == "iterable")
    result = v.is_list() || v.is_string() || v.kind() == K::kDict || v.is_undefined();
  else if (name == "callable")
    result = v.kind() == K::kFunction;
  else if (name == "even" || name == "odd") {
    if (!is_integer(v))
      throw TemplateError("test '" + name + "' needs an integer, not " + v.type_name());
    result = (v.as_int() % 2 == 0) == (name == "even");
  } else if (name == "divisibleby") {
    Value n = args.get(0, "num");
    if (!is_integer(v) || !is_integer(n) || n.as_int() == 0)
      throw TemplateError("test 'divisibleby' needs integers, the divisor non-zero");
    result = v.as_int() % n.as_int() == 0;
  } else if (name == "lower" || name == "upper") {
    if (!v.is_string()) throw TemplateError("test '" + name + "' needs a string");
    bool any = false, all = true;
    for (unsigned char c : v.as_string())
      if (std::isalpha(c))
        any = true, all &= name == "lower" ? std::islower(c) != 0 : std::isupper(c) != 0;
    result = any && all;
  } else {
    throw TemplateError("the test '" + name + "' is not supported in chat templates");
  }
  args.expect_no_more();
  return result;
}

namespace {

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = s[i];
    char buf[16];
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else if (c >= 0x80 && ensure_ascii) {
      const size_t n = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      unsigned code = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
      for (size_t k = 1; k < n && i + k < s.size(); ++k) code = code << 6 | (s[i + k] & 0x3F);
      i += n - 1;
      if (code >= 0x10000) {
        code -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (code >> 10),
                      0xDC00 + (code & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", code);
      }
      out += buf;
    } else {
      out += char(c);
    }
  }
  out += '"';
}

void dump(std::string& out, const Value& v, bool ensure_ascii, int indent, bool sort_keys,
          int level) {
  using K = Value::Kind;
  const std::string newline = indent >= 0 ? "\n" + std::string((level + 1) * indent, ' ') : "";
  const std::string close = indent >= 0 ? "\n" + std::string(level * indent, ' ') : "";
  const char* item_separator = indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case K::kNone:
      out += "null";
      return;
    case K::kBool:
      out += v.as_bool() ? "true" : "false";
      return;
    case K::kInt:
      out += std::to_string(v.as_int());
      return;
    case K::kFloat: {
      const double d = v.as_double();
      out += std::isnan(d)   ? "NaN"
             : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                             : python_float(d);
      return;
    }
    case K::kString:
      json_string(out, v.as_string(), ensure_ascii);
      return;
    case K::kList: {
      if (v.as_list().empty()) {
        out += "[]";
        return;
      }
      out += "[";
      for (size_t i = 0; i < v.as_list().size(); ++i) {
        out += (i ? item_separator : "") + newline;
        dump(out, v.as_list()[i], ensure_ascii, indent, sort_keys, level + 1);
      }
      out += close + "]";
      return;
    }
    case K::kDict: {
      auto items = v.as_dict().items;
      if (items.empty()) {
        out += "{}";
        return;
      }
      if (sort_keys)
        std::stable_sort(items.begin(), items.end(),
                         [](auto& a, auto& b) { return a.first < b.first; });
      out += "{";
      for (size_t i = 0; i < items.size(); ++i) {
        out += (i ? item_separator : "") + newline;
        json_string(out, items[i].first, ensure_ascii);
        out += ": ";
        dump(out, items[i].second, ensure_ascii, indent, sort_keys, level + 1);
      }
      out += close + "}";
      return;
    }
    default:
      throw TemplateError("Object of type " + v.type_name() + " is not JSON serializable");
  }
}

Value range_of(CallArgs& args) {
  args.callee = "range";
  Value a = args.get(0, "start"), b = args.get(1, "stop"),
        c = args.get(2, "step", Value(int64_t{1}));
  args.expect_no_more();
  int64_t start = 0, stop = a.as_int(), step = c.as_int();
  if (!b.is_undefined()) start = a.as_int(), stop = b.as_int();
  if (step == 0) throw TemplateError("range() arg 3 must not be zero");
  // Counted in 128 bits: the difference of two 64-bit bounds may not fit 64.
  const __int128 span = (__int128)stop - start;
  const __int128 count = span / step + (span % step != 0 && (span > 0) == (step > 0));
  if (count > 100000) throw TemplateError("range() is limited to 100000 items in chat templates");
  List out;
  for (int64_t k = 0; k < (int64_t)count; ++k)
    out.emplace_back((int64_t)((__int128)start + (__int128)k * step));
  return Value(out);
}

Value keywords_dict(CallArgs& args) {
  Dict d;
  for (auto& [k, v] : args.keyword) d.set(k, v);
  if (!args.positional.empty())
    throw TemplateError(args.callee + "() takes keyword arguments only");
  return Value(d);
}

}  // namespace

std::string json_dumps(const Value& value, bool ensure_ascii, int indent, bool sort_keys) {
  std::string out;
  dump(out, value, ensure_ascii, indent, sort_keys, 0);
  return out;
}

Dict builtin_globals() {
  Dict g;
  g.set("range", Value::function("range", range_of));
  g.set("namespace", Value::function("namespace", [](CallArgs& args) {
          args.callee = "namespace";
          return Value::namespace_of(keywords_dict(args).as_dict());
        }));
  g.set("dict", Value::function("dict", [](CallArgs& args) {
          args.callee = "dict";
          return keywords_dict(args);
        }));
  g.set("raise_exception", Value::function("raise_exception", [](CallArgs& args) -> Value {
          throw TemplateError("raise_exception: " + args.get(0, "message").str());
        }));
  g.set("strftime_now", Value::function("strftime_now", [](CallArgs& args) {
          const std::string format = args.get(0, "format").str();
          std::time_t now = std::time(nullptr);
          std::tm local{};
          localtime_r(&now, &local);
          char buf[256];
          return Value(std::string(buf, std::strftime(buf, sizeof buf, format.c_str(), &local)));
        }));
  return g;
}

}  // namespace trident::chat_template
