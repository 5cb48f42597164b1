#pragma once
// One input line of `trident curate`: a JSON object with the document's text under a key and,
// optionally, an id. Kept as the parsed object so that every other field reaches the output.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace trident::curation {

struct ParsedLine {
  nlohmann::ordered_json object;  // the whole line, every field kept, in its order
  std::string text;               // object[text_key]
  std::string id;                 // object[id_key] as a string ("" when absent)
  bool has_id = false;
};

// Pure function of its input (no I/O, no global state), so it can be fuzzed: "" when the line
// is usable, otherwise why not ("invalid UTF-8 at byte N", "invalid JSON", "missing key ...").
// An id may be a string or an integer; the text must be a string.
std::string parse_curate_line(std::string_view line, const std::string& text_key,
                              const std::string& id_key, ParsedLine* out);

}  // namespace trident::curation
