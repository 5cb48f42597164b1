// Attribute and item access, and the Python methods of str, dict and list.
#include <algorithm>

#include "chat_template/builtins.h"
#include "chat_template/python_str.h"

namespace trident::chat_template {
namespace {

std::string string_arg(CallArgs& args, size_t i, const std::string& name) {
  Value v = args.get(i, name);
  if (!v.is_string())
    throw TemplateError(args.callee + "() argument '" + name + "' must be str, not " +
                        v.type_name());
  return v.as_string();
}

Value optional_string(CallArgs& args, size_t i, const std::string& name) {
  Value v = args.get(i, name, Value::none());
  if (!v.is_none() && !v.is_string())
    throw TemplateError(args.callee + "() argument must be str or None, not " + v.type_name());
  return v;
}

long int_arg(CallArgs& args, size_t i, const std::string& name, long fallback) {
  Value v = args.get(i, name, Value(int64_t(fallback)));
  if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool)
    throw TemplateError(args.callee + "() argument '" + name + "' must be int, not " +
                        v.type_name());
  return (long)v.as_int();
}

List strings(const std::vector<std::string>& parts) {
  List out;
  for (const auto& p : parts) out.emplace_back(p);
  return out;
}

// startswith/endswith take a string or a tuple of strings.
bool affix_matches(const std::string& s, const Value& affix, bool at_start) {
  if (affix.is_list()) {
    for (const Value& a : affix.as_list())
      if (affix_matches(s, a, at_start)) return true;
    return false;
  }
  if (!affix.is_string())
    throw TemplateError("startswith/endswith take str or a tuple of str, not " + affix.type_name());
  const std::string& a = affix.as_string();
  if (a.size() > s.size()) return false;
  return at_start ? s.compare(0, a.size(), a) == 0
                  : s.compare(s.size() - a.size(), a.size(), a) == 0;
}

Value string_method(const std::string& s, const std::string& name, CallArgs& args) {
  if (name == "startswith" || name == "endswith")
    return Value(affix_matches(s, args.get(0, "prefix"), name == "startswith"));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Value chars = optional_string(args, 0, "chars");
    const std::string* set = chars.is_none() ? nullptr : &chars.as_string();
    return Value(py_strip(s, set, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    Value sep = optional_string(args, 0, "sep");
    const long maxsplit = int_arg(args, 1, "maxsplit", -1);
    return Value(strings(
        py_split(s, sep.is_none() ? nullptr : &sep.as_string(), maxsplit, name == "rsplit")));
  }
  if (name == "upper") return Value(py_upper(s));
  if (name == "lower") return Value(py_lower(s));
  if (name == "title") return Value(py_title(s));
  if (name == "capitalize") return Value(py_capitalize(s));
  if (name == "replace") {
    std::string old = string_arg(args, 0, "old"), with = string_arg(args, 1, "new");
    return Value(py_replace(s, old, with, int_arg(args, 2, "count", -1)));
  }
  if (name == "find" || name == "rfind")
    return Value(int64_t(py_find(s, string_arg(args, 0, "sub"), name == "rfind")));
  if (name == "count") return Value(int64_t(py_count(s, string_arg(args, 0, "sub"))));
  if (name == "join") {
    std::string out;
    const List items = iterate(args.get(0, "iterable"));
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        throw TemplateError("str.join() expects str items, not " + items[i].type_name());
      out += (i ? s : "") + items[i].as_string();
    }
    return Value(out);
  }
  if (name == "splitlines") {
    std::vector<std::string> lines;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] == '\n' || s[i] == '\r') {
        lines.push_back(s.substr(start, i - start));
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        start = i + 1;
      }
    if (start < s.size()) lines.push_back(s.substr(start));
    return Value(strings(lines));
  }
  auto all_of = [&](auto predicate) {
    std::vector<std::string> cps = code_points(s);
    return Value(!cps.empty() && std::all_of(cps.begin(), cps.end(), predicate));
  };
  if (name == "isspace")
    return all_of(
        [](const std::string& c) { return c.size() == 1 && is_python_space((unsigned char)c[0]); });
  if (name == "isdigit")
    return all_of(
        [](const std::string& c) { return c.size() == 1 && std::isdigit((unsigned char)c[0]); });
  if (name == "isalpha")
    return all_of(
        [](const std::string& c) { return c.size() == 1 && std::isalpha((unsigned char)c[0]); });
  throw TemplateError("the str method '" + name + "' is not supported in chat templates");
}

const char* const kStringMethods[] = {
    "startswith", "endswith",     "strip",       "lstrip",     "rstrip",  "split",   "rsplit",
    "upper",      "lower",        "title",       "capitalize", "replace", "find",    "rfind",
    "count",      "join",         "splitlines",  "isspace",    "isdigit", "isalpha", "format",
    "index",      "rindex",       "zfill",       "center",     "ljust",   "rjust",   "encode",
    "casefold",   "swapcase",     "partition",   "rpartition", "isalnum", "isupper", "islower",
    "expandtabs", "removeprefix", "removesuffix"};
const char* const kDictMethods[] = {"items",  "keys",       "values", "get",     "copy",    "pop",
                                    "update", "setdefault", "clear",  "popitem", "fromkeys"};
const char* const kListMethods[] = {"index",  "count",   "append", "extend", "insert", "pop",
                                    "remove", "reverse", "sort",   "clear",  "copy"};

template <size_t N>
bool in(const char* const (&names)[N], const std::string& name) {
  return std::find_if(std::begin(names), std::end(names),
                      [&](const char* n) { return name == n; }) != std::end(names);
}

Value dict_method(const Dict& d, const std::string& name, CallArgs& args) {
  if (name == "items") {
    List out;
    for (const auto& [k, v] : d.items) out.push_back(Value::tuple({Value(k), v}));
    return Value(out);
  }
  if (name == "keys" || name == "values") {
    List out;
    for (const auto& [k, v] : d.items) out.push_back(name == "keys" ? Value(k) : v);
    return Value(out);
  }
  if (name == "get") {
    Value key = args.get(0, "key");
    Value fallback = args.get(1, "default", Value::none());
    const Value* found = key.is_string() ? d.find(key.as_string()) : nullptr;
    return found ? *found : fallback;
  }
  if (name == "copy") return Value(Dict(d));
  throw TemplateError("dict." + name + "() modifies a dict, which the sandbox forbids");
}

Value list_method(const List& l, const std::string& name, CallArgs& args) {
  Value x = args.get(0, "value");
  if (name == "count") return Value(int64_t(std::count(l.begin(), l.end(), x)));
  if (name == "index") {
    for (size_t i = 0; i < l.size(); ++i)
      if (l[i] == x) return Value(int64_t(i));
    throw TemplateError(x.repr() + " is not in list");
  }
  if (name == "copy") return Value(List(l));
  throw TemplateError("list." + name + "() modifies a list, which the sandbox forbids");
}

Value bound_method(const Value& object, const std::string& name) {
  return Value::function(object.type_name() + "." + name, [object, name](CallArgs& args) {
    args.callee = object.type_name() + "." + name;
    Value result = object.is_string() ? string_method(object.as_string(), name, args)
                   : object.is_list() ? list_method(object.as_list(), name, args)
                                      : dict_method(object.as_dict(), name, args);
    args.expect_no_more();
    return result;
  });
}

std::string object_name(const Value& v) {
  return v.is_mapping() && v.kind() == Value::Kind::kDict ? "dict object"
                                                          : v.type_name() + " object";
}

}  // namespace

Value get_attribute(const Value& object, const std::string& name) {
  if (object.is_undefined())
    throw TemplateError(object.name().empty() ? "an undefined value has no attribute '" + name + "'"
                                              : object.name());
  if (object.kind() == Value::Kind::kNamespace) {
    const Value* v = object.namespace_attributes().find(name);
    return v ? *v : Value::undefined("'Namespace' has no attribute '" + name + "'");
  }
  if ((object.is_string() && in(kStringMethods, name)) ||
      (object.is_list() && in(kListMethods, name)) ||
      (object.kind() == Value::Kind::kDict && in(kDictMethods, name)))
    return bound_method(object, name);
  if (object.kind() == Value::Kind::kDict) {
    const Value* v = object.as_dict().find(name);
    if (v) return *v;
  }
  return Value::undefined("'" + object_name(object) + "' has no attribute '" + name + "'");
}

namespace {

// Python's index into a sequence of `size`, negatives from the end; -1 when out of range.
long normalise_index(int64_t index, size_t size) {
  if (index < 0) index += (int64_t)size;
  return index < 0 || index >= (int64_t)size ? -1 : (long)index;
}

}  // namespace

Value get_item(const Value& object, const Value& key) {
  if (object.is_undefined())
    throw TemplateError(object.name().empty() ? "an undefined value is not subscriptable"
                                              : object.name());
  const bool integer = key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool;
  if (object.is_list() && integer) {
    const long i = normalise_index(key.as_int(), object.as_list().size());
    if (i >= 0) return object.as_list()[i];
    return Value::undefined("list index out of range: " + key.repr());
  }
  if (object.is_string() && integer) {
    std::vector<std::string> cps = code_points(object.as_string());
    const long i = normalise_index(key.as_int(), cps.size());
    if (i >= 0) return Value(cps[i]);
    return Value::undefined("string index out of range: " + key.repr());
  }
  if (object.is_mapping() && key.is_string()) {
    const Dict& d =
        object.kind() == Value::Kind::kNamespace ? object.namespace_attributes() : object.as_dict();
    const Value* v = d.find(key.as_string());
    if (v) return *v;
  }
  if (key.is_string()) return get_attribute(object, key.as_string());
  return Value::undefined("'" + object_name(object) + "' has no item " + key.repr());
}

List iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return value.as_list();
    case Value::Kind::kString: {
      List out;
      for (auto& cp : code_points(value.as_string())) out.emplace_back(cp);
      return out;
    }
    case Value::Kind::kDict: {
      List out;
      for (const auto& [k, v] : value.as_dict().items) out.emplace_back(k);
      return out;
    }
    default:
      throw TemplateError("'" + value.type_name() + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string())
      throw TemplateError("'in <string>' requires string as left operand, not " + item.type_name());
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_mapping()) {
    const Dict& d = container.kind() == Value::Kind::kNamespace ? container.namespace_attributes()
                                                                : container.as_dict();
    return item.is_string() && d.find(item.as_string());
  }
  for (const Value& x : iterate(container))
    if (x == item) return true;
  return false;
}

int64_t length_of(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return (int64_t)code_points(value.as_string()).size();
    case Value::Kind::kList:
      return (int64_t)value.as_list().size();
    case Value::Kind::kDict:
      return (int64_t)value.as_dict().items.size();
    default:
      throw TemplateError("object of type '" + value.type_name() + "' has no len()");
  }
}

}  // namespace trident::chat_template
