// Jinja's built-in filters, with their Python signatures and semantics.
#include <algorithm>
#include <cmath>
#include <map>

#include "chat_template/builtins.h"
#include "chat_template/python_str.h"

namespace trident::chat_template {
namespace {

using K = Value::Kind;

bool flag(CallArgs& args, size_t i, const std::string& name) {
  return args.get(i, name, Value(false)).truthy();
}

// `attribute="a.b"` or an integer index, as Jinja's make_attrgetter.
Value attribute_of(const Value& item, const Value& attribute) {
  if (attribute.kind() == K::kInt) return get_item(item, attribute);
  Value v = item;
  const std::string& path = attribute.as_string();
  size_t start = 0;
  for (;;) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    v = get_item(v, digits ? Value(parse_int64(part)) : Value(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value dict_items(const Value& v) {
  if (v.kind() != K::kDict) throw TemplateError("expected a dict, got " + v.type_name());
  CallArgs none;
  return get_attribute(v, "items").as_function()(none);
}

Value lower_if(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value(py_lower(v.as_string())) : v;
}

Value sorted(const Value& seq, CallArgs& args) {
  const bool reverse = flag(args, 0, "reverse"), case_sensitive = flag(args, 1, "case_sensitive");
  Value attribute = args.get(2, "attribute", Value::none());
  List items = iterate(seq);
  auto key = [&](const Value& v) {
    return lower_if(attribute.is_none() ? v : attribute_of(v, attribute), case_sensitive);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? less_than(key(b), key(a)) : less_than(key(a), key(b));
  });
  return Value(items);
}

Value joined(const Value& seq, CallArgs& args) {
  const std::string separator = args.get(0, "d", Value("")).str();
  Value attribute = args.get(1, "attribute", Value::none());
  std::string out;
  const List items = iterate(seq);
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? separator : "") +
           (attribute.is_none() ? items[i] : attribute_of(items[i], attribute)).str();
  return Value(out);
}

// select/reject(test, args...) and selectattr/rejectattr(attribute, test, args...).
Value selected(const Value& seq, CallArgs& args, bool by_attribute, bool keep) {
  Value attribute = by_attribute ? args.get(0, "attribute") : Value();
  const size_t first = by_attribute ? 1 : 0;
  Value test = args.get(first, "test", Value::none());
  CallArgs test_args;
  for (size_t i = first + 1; i < args.positional.size(); ++i)
    test_args.positional.push_back(args.positional[i]);
  args.consumed_positional = args.positional.size();
  List out;
  for (const Value& item : iterate(seq)) {
    const Value subject = by_attribute ? attribute_of(item, attribute) : item;
    CallArgs call = test_args;
    const bool passed =
        test.is_none() ? subject.truthy() : apply_test(test.as_string(), subject, call);
    if (passed == keep) out.push_back(item);
  }
  return Value(out);
}

Value mapped(const Value& seq, CallArgs& args) {
  List out;
  if (args.positional.empty()) {
    Value attribute = args.get(0, "attribute");
    Value fallback = args.get(1, "default");
    for (const Value& item : iterate(seq)) {
      Value v = attribute_of(item, attribute);
      out.push_back(v.is_undefined() && !fallback.is_undefined() ? fallback : v);
    }
    return Value(out);
  }
  const std::string filter = args.positional[0].str();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  args.consumed_positional = args.positional.size();
  args.consumed_keyword.assign(args.keyword.size(), true);
  for (const Value& item : iterate(seq)) {
    CallArgs call = rest;
    out.push_back(apply_filter(filter, item, call));
  }
  return Value(out);
}

Value indented(const Value& v, CallArgs& args) {
  Value width = args.get(0, "width", Value(int64_t{4}));
  const bool first = flag(args, 1, "first"), blank = flag(args, 2, "blank");
  if (!width.is_string() && (width.as_int() < 0 || width.as_int() > 4096))
    throw TemplateError("indent: the width must be a string or 0..4096 spaces");
  const std::string pad = width.is_string() ? width.as_string() : std::string(width.as_int(), ' ');
  std::string s = v.str(), out;
  const std::string newline = "\n";
  std::vector<std::string> lines = py_split(s, &newline, -1, false);
  for (size_t i = 0; i < lines.size(); ++i) {
    const bool indent =
        (i > 0 || first) && (blank || !py_strip(lines[i], nullptr, true, true).empty());
    out += (i ? "\n" : "") + (indent ? pad : "") + lines[i];
  }
  return Value(out);
}

Value to_int(const Value& v, CallArgs& args) {
  Value fallback = args.get(0, "default", Value(int64_t{0}));
  args.get(1, "base");
  if (v.kind() == K::kInt || v.kind() == K::kBool) return Value(v.as_int());
  if (v.kind() == K::kFloat) return Value(truncate_to_int64(v.as_double()));
  if (v.is_string()) {
    try {
      size_t used = 0;
      const std::string s = py_strip(v.as_string(), nullptr, true, true);
      const int64_t i = std::stoll(s, &used);
      if (used == s.size()) return Value(i);
      return Value(truncate_to_int64(std::stod(s)));
    } catch (const std::exception&) {
    }
  }
  return fallback;
}

Value to_float(const Value& v, CallArgs& args) {
  Value fallback = args.get(0, "default", Value(0.0));
  if (v.is_number() || v.kind() == K::kBool) return Value(v.as_double());
  if (v.is_string()) {
    try {
      return Value(std::stod(v.as_string()));
    } catch (const std::exception&) {
    }
  }
  return fallback;
}

Value rounded(const Value& v, CallArgs& args) {
  const int64_t precision = args.get(0, "precision", Value(int64_t{0})).as_int();
  const std::string method = args.get(1, "method", Value("common")).str();
  const double scale = std::pow(10.0, (double)precision), x = v.as_double() * scale;
  // Python's round() (Jinja's "common") rounds halves to even.
  double r = method == "ceil"    ? std::ceil(x)
             : method == "floor" ? std::floor(x)
                                 : std::nearbyint(x);
  if (method != "common" && method != "ceil" && method != "floor")
    throw TemplateError("round: method must be common, ceil or floor");
  return Value(r / scale);
}

// Jinja's title filter (not str.title): each word's first character upper-cased and the rest
// lower-cased, words starting after whitespace or any of - ( { [ <.
std::string title_words(const std::string& s) {
  std::string out;
  bool word_start = true;
  for (const std::string& cp : code_points(s)) {
    const bool separator =
        (cp.size() == 1 && std::string("-({[<").find(cp[0]) != std::string::npos) ||
        py_strip(cp, nullptr, true, true).empty();
    out += separator ? cp : word_start ? py_upper(cp) : py_lower(cp);
    word_start = separator;
  }
  return out;
}

Value html_escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return Value(out);
}

Value unique_items(const Value& seq, CallArgs& args) {
  const bool case_sensitive = flag(args, 0, "case_sensitive");
  Value attribute = args.get(1, "attribute", Value::none());
  List out, seen;
  for (const Value& item : iterate(seq)) {
    Value key =
        lower_if(attribute.is_none() ? item : attribute_of(item, attribute), case_sensitive);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value(out);
}

Value extreme(const Value& seq, CallArgs& args, bool maximum) {
  const bool case_sensitive = flag(args, 0, "case_sensitive");
  Value attribute = args.get(1, "attribute", Value::none());
  const List items = iterate(seq);
  if (items.empty())
    return Value::undefined("no " + std::string(maximum ? "max" : "min") + " of an empty sequence");
  const Value* best = &items[0];
  auto key = [&](const Value& v) {
    return lower_if(attribute.is_none() ? v : attribute_of(v, attribute), case_sensitive);
  };
  for (const Value& item : items)
    if (maximum ? less_than(key(*best), key(item)) : less_than(key(item), key(*best))) best = &item;
  return *best;
}

Value summed(const Value& seq, CallArgs& args) {
  Value attribute = args.get(0, "attribute", Value::none());
  Value total = args.get(1, "start", Value(int64_t{0}));
  for (const Value& item : iterate(seq)) {
    const Value x = attribute.is_none() ? item : attribute_of(item, attribute);
    if (!(x.is_number() || x.kind() == K::kBool) ||
        !(total.is_number() || total.kind() == K::kBool))
      throw TemplateError("sum: unsupported operand types " + total.type_name() + " and " +
                          x.type_name());
    total = total.kind() == K::kFloat || x.kind() == K::kFloat
                ? Value(total.as_double() + x.as_double())
                : Value(total.as_int() + x.as_int());
  }
  return total;
}

Value tojson(const Value& v, CallArgs& args) {
  const bool ensure_ascii = flag(args, 0, "ensure_ascii");
  Value indent = args.get(1, "indent", Value::none());
  Value separators = args.get(2, "separators", Value::none());
  const bool sort_keys = flag(args, 3, "sort_keys");
  if (!separators.is_none()) throw TemplateError("tojson: separators are not supported");
  return Value(
      json_dumps(v, ensure_ascii, indent.is_none() ? -1 : (int)indent.as_int(), sort_keys));
}

Value centered(const std::string& s, CallArgs& args) {
  const int64_t width = args.get(0, "width", Value(int64_t{80})).as_int();
  if (width > (1 << 24)) throw TemplateError("center: a width above 16 Mi");
  const int64_t n = (int64_t)code_points(s).size();
  if (width <= n) return Value(s);
  const int64_t left = (width - n) / 2 + ((width - n) % 2 & width % 2);
  return Value(std::string(left, ' ') + s + std::string(width - n - left, ' '));
}

Value replaced(const std::string& s, CallArgs& args) {
  const std::string old = args.get(0, "old").str(), with = args.get(1, "new").str();
  Value count = args.get(2, "count", Value::none());
  return Value(py_replace(s, old, with, count.is_none() ? -1 : (long)count.as_int()));
}

Value trimmed(const std::string& s, CallArgs& args) {
  Value chars = args.get(0, "chars", Value::none());
  return Value(py_strip(s, chars.is_none() ? nullptr : &chars.as_string(), true, true));
}

Value absolute(const Value& v) {
  if (v.kind() != K::kFloat && v.as_int() == INT64_MIN)
    throw TemplateError("abs: the result does not fit 64 bits");
  return v.kind() == K::kFloat ? Value(std::fabs(v.as_double()))
                               : Value(int64_t(std::llabs(v.as_int())));
}

Value reversed(const Value& v) {
  if (v.is_string()) {
    std::vector<std::string> cps = code_points(v.as_string());
    std::string out;
    for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
    return Value(out);
  }
  List items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value(items);
}

Value end_item(const Value& v, bool first) {
  const List items = iterate(v);
  if (items.empty())
    return Value::undefined("no " + std::string(first ? "first" : "last") +
                            " item of an empty sequence");
  return first ? items.front() : items.back();
}

Value dict_sorted(const Value& v, CallArgs& args) {
  List pairs = dict_items(v).as_list();
  const bool case_sensitive = flag(args, 0, "case_sensitive");
  const bool by_value = args.get(1, "by", Value("key")).str() == "value";
  const bool reverse = flag(args, 2, "reverse");
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    const Value ka = lower_if(a.as_list()[by_value], case_sensitive),
                kb = lower_if(b.as_list()[by_value], case_sensitive);
    return reverse ? less_than(kb, ka) : less_than(ka, kb);
  });
  return Value(pairs);
}

Value with_default(const Value& v, CallArgs& args) {
  Value fallback = args.get(0, "default_value", Value(""));
  return v.is_undefined() || (flag(args, 1, "boolean") && !v.truthy()) ? fallback : v;
}

using Filter = Value (*)(const Value&, CallArgs&);

// Every supported filter by its Jinja name (aliases included), in one table: the dispatch
// and the list an unsupported filter's error names.
const std::map<std::string, Filter>& filter_table() {
  static const std::map<std::string, Filter> table = {
      {"abs", [](const Value& v, CallArgs&) { return absolute(v); }},
      {"attr",
       [](const Value& v, CallArgs& a) { return get_attribute(v, a.get(0, "name").str()); }},
      {"capitalize", [](const Value& v, CallArgs&) { return Value(py_capitalize(v.str())); }},
      {"center", [](const Value& v, CallArgs& a) { return centered(v.str(), a); }},
      {"count", [](const Value& v, CallArgs&) { return Value(length_of(v)); }},
      {"d", with_default},
      {"default", with_default},
      {"dictsort", dict_sorted},
      {"e", [](const Value& v, CallArgs&) { return html_escaped(v.str()); }},
      {"escape", [](const Value& v, CallArgs&) { return html_escaped(v.str()); }},
      {"first", [](const Value& v, CallArgs&) { return end_item(v, true); }},
      {"float", to_float},
      {"indent", indented},
      {"int", to_int},
      {"items",
       [](const Value& v, CallArgs&) { return dict_items(v.is_undefined() ? Value(Dict{}) : v); }},
      {"join", joined},
      {"last", [](const Value& v, CallArgs&) { return end_item(v, false); }},
      {"length", [](const Value& v, CallArgs&) { return Value(length_of(v)); }},
      {"list", [](const Value& v, CallArgs&) { return Value(iterate(v)); }},
      {"lower", [](const Value& v, CallArgs&) { return Value(py_lower(v.str())); }},
      {"map", mapped},
      {"max", [](const Value& v, CallArgs& a) { return extreme(v, a, true); }},
      {"min", [](const Value& v, CallArgs& a) { return extreme(v, a, false); }},
      {"reject", [](const Value& v, CallArgs& a) { return selected(v, a, false, false); }},
      {"rejectattr", [](const Value& v, CallArgs& a) { return selected(v, a, true, false); }},
      {"replace", [](const Value& v, CallArgs& a) { return replaced(v.str(), a); }},
      {"reverse", [](const Value& v, CallArgs&) { return reversed(v); }},
      {"round", rounded},
      {"safe", [](const Value& v, CallArgs&) { return v; }},
      {"select", [](const Value& v, CallArgs& a) { return selected(v, a, false, true); }},
      {"selectattr", [](const Value& v, CallArgs& a) { return selected(v, a, true, true); }},
      {"sort", sorted},
      {"string", [](const Value& v, CallArgs&) { return Value(v.str()); }},
      {"sum", summed},
      {"title", [](const Value& v, CallArgs&) { return Value(title_words(v.str())); }},
      {"tojson", tojson},
      {"trim", [](const Value& v, CallArgs& a) { return trimmed(v.str(), a); }},
      {"unique", unique_items},
      {"upper", [](const Value& v, CallArgs&) { return Value(py_upper(v.str())); }},
      {"wordcount",
       [](const Value& v, CallArgs&) {
         return Value(int64_t(py_split(v.str(), nullptr, -1, false).size()));
       }},
  };
  return table;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, CallArgs& args) {
  const auto& table = filter_table();
  const auto found = table.find(name);
  if (found == table.end()) {
    std::string names;
    for (const auto& [known, filter] : table) names += (names.empty() ? "" : ", ") + known;
    throw TemplateError("the filter '" + name +
                        "' is not supported in chat templates (supported: " + names + ")");
  }
  args.callee = "filter " + name;
  Value result = found->second(v, args);
  args.expect_no_more();
  return result;
}

}  // namespace trident::chat_template
