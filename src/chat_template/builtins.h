#pragma once
// Jinja's built-in filters, tests and globals, and the Python methods of str, dict and list
// that chat templates call, each with Python's semantics. Anything else is a TemplateError
// that names it.
#include <string>

#include "chat_template/value.h"

namespace trident::chat_template {

Value apply_filter(const std::string& name, const Value& value, CallArgs& args);
bool apply_test(const std::string& name, const Value& value, CallArgs& args);

// obj.name: a Python attribute first (a bound method of str, dict or list), then the item,
// as Jinja's getattr; Undefined when neither exists.
Value get_attribute(const Value& object, const std::string& name);
// obj[key]: the item first, then the attribute, as Jinja's getitem.
Value get_item(const Value& object, const Value& key);

// range, namespace, dict, raise_exception and strftime_now (HF's two additions).
Dict builtin_globals();

// json.dumps(value, ensure_ascii, indent, sort_keys) as HF's tojson calls it (Python's
// separators: ", " and ": ", or "," and ": " with an indent).
std::string json_dumps(const Value& value, bool ensure_ascii, int indent, bool sort_keys);

// The elements `for` iterates: a list's items, a dict's keys, a string's characters,
// nothing for Undefined; a TemplateError otherwise.
List iterate(const Value& value);

// Python's `item in container`: a substring, a list element or a dict key.
bool contains(const Value& container, const Value& item);

// Python's len(); Undefined has length 0, as Jinja's.
int64_t length_of(const Value& value);

}  // namespace trident::chat_template
