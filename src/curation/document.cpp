#include "curation/document.h"

#include "tokenizer/unicode_classes.h"

namespace trident::curation {

std::string parse_curate_line(std::string_view line, const std::string& text_key,
                              const std::string& id_key, ParsedLine* out) {
  size_t bad_byte;
  // nlohmann::json accepts some invalid UTF-8 inside strings and only fails when dumping;
  // checking first turns that into a bad line with its byte offset.
  if (!tokenizer::is_valid_utf8(line, &bad_byte))
    return "invalid UTF-8 at byte " + std::to_string(bad_byte);
  out->object = nlohmann::ordered_json::parse(line, nullptr, false);
  if (out->object.is_discarded()) return "invalid JSON";
  if (!out->object.is_object()) return "not a JSON object";
  auto it = out->object.find(text_key);
  if (it == out->object.end()) return "missing key \"" + text_key + "\"";
  if (!it->is_string()) return "key \"" + text_key + "\" is not a string";
  out->text = it->get<std::string>();
  out->id.clear();
  out->has_id = false;
  auto id = out->object.find(id_key);
  if (id != out->object.end()) {
    if (id->is_string())
      out->id = id->get<std::string>();
    else if (id->is_number_integer())
      out->id = id->dump();
    else
      return "key \"" + id_key + "\" is neither a string nor an integer";
    out->has_id = true;
  }
  return "";
}

}  // namespace trident::curation
