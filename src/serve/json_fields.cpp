#include "serve/json_fields.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "tokenizer/unicode_classes.h"

namespace trident::serve {

namespace {

std::string number_text(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

std::string range_text(std::int64_t min, std::int64_t max) {
  if (max == INT64_MAX) return "an integer >= " + std::to_string(min);
  return "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}

}  // namespace

ApiError parse_json_object(std::string_view body, Json* out) {
  size_t bad = 0;
  if (!tokenizer::is_valid_utf8(body, &bad))
    return bad_request("", "request body is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  if (body.empty()) return bad_request("", "request body is not valid JSON (it is empty)");
  try {
    *out = Json::parse(body);
  } catch (const Json::exception& e) {  // parse_error, or out_of_range for 1e999
    // "[json.exception.parse_error.101] parse error at line 1, column 9: ..." without the tag.
    std::string why = e.what();
    if (size_t tag = why.find("] "); tag != std::string::npos) why = why.substr(tag + 2);
    return bad_request("", "request body is not valid JSON: " + why);
  }
  if (!out->is_object())
    return bad_request("", "request body must be a JSON object, got " + describe(*out));
  return {};
}

std::string describe(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::array:
      return "a list";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::number_integer:
      return "the integer " + std::to_string(value.get<std::int64_t>());
    case Json::value_t::number_unsigned:
      return "the integer " + std::to_string(value.get<std::uint64_t>());
    case Json::value_t::number_float:
      return "the number " + number_text(value.get<double>());
    default:
      return "an unsupported value";
  }
}

bool present(const Json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && !it->is_null();
}

ApiError read_bool(const Json& object, const char* name, bool* out) {
  if (!present(object, name)) return {};
  const Json& v = object.at(name);
  if (!v.is_boolean())
    return bad_request(name, std::string(name) + " must be true or false, got " + describe(v));
  *out = v.get<bool>();
  return {};
}

ApiError read_int(const Json& object, const char* name, std::int64_t min, std::int64_t max,
                  std::int64_t* out) {
  if (!present(object, name)) return {};
  const Json& v = object.at(name);
  std::string rule = std::string(name) + " must be " + range_text(min, max);
  if (!v.is_number_integer()) return bad_request(name, rule + ", got " + describe(v));
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > (std::uint64_t)INT64_MAX)
    return bad_request(name,
                       rule + " (at most " + std::to_string(INT64_MAX) + "), got " + describe(v));
  std::int64_t x = v.get<std::int64_t>();
  if (x < min || x > max) return bad_request(name, rule + ", got " + describe(v));
  *out = x;
  return {};
}

ApiError read_number(const Json& object, const char* name, double min, bool min_open, double max,
                     double* out) {
  if (!present(object, name)) return {};
  const Json& v = object.at(name);
  std::string rule = std::string(name) + " must be a number in " + (min_open ? "(" : "[") +
                     number_text(min) + ", " + number_text(max) + "]";
  if (!v.is_number()) return bad_request(name, rule + ", got " + describe(v));
  double x = v.get<double>();
  bool above_min = min_open ? x > min : x >= min;
  if (!(above_min && x <= max)) return bad_request(name, rule + ", got " + describe(v));
  *out = x;
  return {};
}

ApiError read_string(const Json& object, const char* name, std::string* out) {
  if (!present(object, name)) return {};
  const Json& v = object.at(name);
  if (!v.is_string())
    return bad_request(name, std::string(name) + " must be a string, got " + describe(v));
  *out = v.get<std::string>();
  return {};
}

ApiError read_strings(const Json& object, const char* name, bool one_allowed, size_t max_items,
                      std::vector<std::string>* out) {
  if (!present(object, name)) return {};
  const Json& v = object.at(name);
  std::string what =
      one_allowed ? " must be a string or a list of strings" : " must be a list of strings";
  if (one_allowed && v.is_string()) {
    *out = {v.get<std::string>()};
    return {};
  }
  if (!v.is_array()) return bad_request(name, name + what + ", got " + describe(v));
  if (v.empty()) return bad_request(name, std::string(name) + " must not be an empty list");
  if (v.size() > max_items)
    return bad_request(name, std::string(name) + " has " + std::to_string(v.size()) +
                                 " entries, at most " + std::to_string(max_items) + " are allowed");
  std::vector<std::string> items;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string field = std::string(name) + "[" + std::to_string(i) + "]";
    if (!v[i].is_string())
      return bad_request(field, field + " must be a string, got " + describe(v[i]));
    items.push_back(v[i].get<std::string>());
  }
  *out = std::move(items);
  return {};
}

}  // namespace trident::serve
