// The checks every task's document conversion shares: each names the field and the rule.
#include <stdexcept>

#include "evaluation/task.h"

namespace trident::evaluation {

const nlohmann::json& field(const nlohmann::json& doc, const char* key) {
  auto it = doc.find(key);
  if (it == doc.end()) throw std::invalid_argument(std::string("missing field \"") + key + "\"");
  return *it;
}

const std::string& string_field(const nlohmann::json& doc, const char* key) {
  const nlohmann::json& v = field(doc, key);
  if (!v.is_string())
    throw std::invalid_argument(std::string("field \"") + key + "\" must be a string, not " +
                                v.type_name());
  return v.get_ref<const std::string&>();
}

long integer_field(const nlohmann::json& doc, const char* key) {
  const nlohmann::json& v = field(doc, key);
  if (v.is_number_integer()) return v.get<long>();
  // Some published layouts store labels as strings ("0", "1").
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (!s.empty() && s.size() < 10 && s.find_first_not_of("0123456789") == std::string::npos)
      return std::stol(s);
  }
  throw std::invalid_argument(std::string("field \"") + key + "\" must be an integer, not " +
                              v.dump());
}

void check_label(long label, size_t choices, const char* key) {
  if (label < 0 || label >= (long)choices)
    throw std::invalid_argument(std::string("label \"") + key + "\" = " + std::to_string(label) +
                                " is out of range for " + std::to_string(choices) + " choices");
}

void check_choices(const std::vector<std::string>& choices) {
  if (choices.empty()) throw std::invalid_argument("empty choice list");
}

}  // namespace trident::evaluation
