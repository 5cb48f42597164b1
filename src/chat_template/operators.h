#pragma once
// Python's binary operators on template values: + - * / // % ** and Jinja's ~, and slicing.
#include <string>

#include "chat_template/value.h"

namespace trident::chat_template {

Value binary_operator(const std::string& op, const Value& a, const Value& b);
// value[start:stop:step]; a null pointer for an omitted bound.
Value slice_of(const Value& value, const Value* start, const Value* stop, const Value* step);

}  // namespace trident::chat_template
