#pragma once
// Typed reading of a request's JSON fields. Each reader leaves *out alone when the field is
// absent or null (the default stays), and otherwise checks the type and the range, returning
// an error that names the field, the rule and what was given.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "serve/api_error.h"

namespace trident::serve {

using Json = nlohmann::json;

// The body as a JSON object: valid UTF-8 first (so the message can say where it is not),
// then valid JSON, then an object at the top.
ApiError parse_json_object(std::string_view body, Json* out);

// "a string", "a list", "the number 1.5", ... for messages (never the whole value).
std::string describe(const Json& value);

bool present(const Json& object, const char* name);

ApiError read_bool(const Json& object, const char* name, bool* out);
ApiError read_int(const Json& object, const char* name, std::int64_t min, std::int64_t max,
                  std::int64_t* out);
// min_open: min itself is excluded (e.g. temperature > 0).
ApiError read_number(const Json& object, const char* name, double min, bool min_open, double max,
                     double* out);
ApiError read_string(const Json& object, const char* name, std::string* out);
// A string or a list of strings (when one_allowed), or a list only; 1..max_items entries.
ApiError read_strings(const Json& object, const char* name, bool one_allowed, size_t max_items,
                      std::vector<std::string>* out);

}  // namespace trident::serve
