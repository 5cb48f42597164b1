#pragma once
// Python's str methods that templates call, on UTF-8 text with Unicode semantics (case
// mappings from ICU, Python's whitespace set).
#include <string>
#include <vector>

namespace trident::chat_template {

bool is_python_space(unsigned code_point);
// strip/lstrip/rstrip: `chars` empty with `whitespace` true means Python's whitespace.
std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right);
std::vector<std::string> py_split(const std::string& s, const std::string* sep, long maxsplit,
                                  bool from_right);
std::string py_replace(const std::string& s, const std::string& old, const std::string& with,
                       long count);
std::string py_upper(const std::string& s);
std::string py_lower(const std::string& s);
std::string py_title(const std::string& s);
std::string py_capitalize(const std::string& s);
long py_find(const std::string& s, const std::string& sub, bool from_right);  // in code points
long py_count(const std::string& s, const std::string& sub);

}  // namespace trident::chat_template
