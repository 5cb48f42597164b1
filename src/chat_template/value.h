#pragma once
// The values a chat template computes with: Jinja's (Python's) None, bool, int, float, str,
// list, dict, namespace and callables, plus Undefined. Lists and dicts are immutable once
// built (HF renders in Jinja's immutable sandbox); a namespace is the one mutable object, as
// in Jinja, so `{% set ns.x = ... %}` inside a loop is seen after it.
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace trident::chat_template {

// A template that cannot be rendered: a syntax error, an unsupported construct, a type error
// or raise_exception(). The message names the construct and the template line.
struct TemplateError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Value;
using List = std::vector<Value>;

// Insertion-ordered, as Python's dict.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);
};

struct CallArgs;
using Function = std::function<Value(CallArgs&)>;

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kFunction
  };

  Value() = default;  // Undefined
  static Value none();
  Value(bool b);
  Value(int64_t i);
  Value(int i) : Value(int64_t{i}) {}
  Value(double d);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  Value(List list);
  Value(Dict dict);
  static Value tuple(List items);  // a list that prints as (a, b)
  static Value namespace_of(Dict attributes);
  static Value function(std::string name, Function fn);
  static Value from_json(const nlohmann::ordered_json& j);
  // The name the value is reported under when undefined ("message.tool_calls").
  static Value undefined(std::string name);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_mapping() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }
  bool is_tuple() const { return tuple_; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return i_; }
  double as_double() const { return kind_ == Kind::kInt ? double(i_) : d_; }
  // The contents, checked: a value of another kind is a TemplateError naming both (a
  // template may hand any value to any filter or method).
  const std::string& as_string() const { return *checked(s_, Kind::kString, "str"); }
  const List& as_list() const { return *checked(list_, Kind::kList, "list"); }
  const Dict& as_dict() const { return *checked(dict_, Kind::kDict, "dict"); }
  Dict& namespace_attributes() const {  // shared and mutable
    return *checked(dict_, Kind::kNamespace, "namespace");
  }
  const Function& as_function() const { return *checked(fn_, Kind::kFunction, "function"); }
  // Undefined's (the message its use gives) and Function's name; "" for others.
  const std::string& name() const;

  bool truthy() const;
  std::string type_name() const;  // Python's: "str", "dict", "NoneType"...
  // str(value) in Python terms, as `{{ value }}` prints it (Undefined prints nothing).
  std::string str() const;
  std::string repr() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool tuple_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Function> fn_;

  template <typename P>
  const P& checked(const P& p, Kind kind, const char* what) const {
    if (kind_ != kind || !p)
      throw TemplateError("expected a " + std::string(what) + ", got " + type_name());
    return p;
  }
};

bool operator==(const Value& a, const Value& b);
// Python's ordering for numbers and strings (sort, <, >); a TemplateError otherwise.
bool less_than(const Value& a, const Value& b);

// A call's arguments: positional, then keyword, consumed by name.
struct CallArgs {
  List positional;
  std::vector<std::pair<std::string, Value>> keyword;
  std::string callee;  // for messages

  // The i-th positional argument or the keyword `name`, or `fallback` if neither is given.
  Value get(size_t i, const std::string& name, Value fallback = Value());
  // An error unless every argument was consumed.
  void expect_no_more() const;
  size_t consumed_positional = 0;
  std::vector<bool> consumed_keyword;
};

// A decimal integer literal or digit string as int64, or a TemplateError (Python's ints are
// unbounded; a template's never need more than 64 bits).
int64_t parse_int64(const std::string& digits);
// A float that fits int64 truncated toward zero (Python's int(x)), or a TemplateError.
int64_t truncate_to_int64(double d);

// Python's repr of a float (the shortest text that reads back the same), as str(float) prints.
std::string python_float(double d);
// Code points of a UTF-8 string (Python's str indexes by them).
std::vector<std::string> code_points(const std::string& s);

}  // namespace trident::chat_template
