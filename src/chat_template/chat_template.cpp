#include "chat_template/chat_template.h"

#include <fstream>
#include <sstream>

#include "chat_template/renderer.h"

namespace trident::chat_template {

ChatTemplate::ChatTemplate(const std::string& source)
    : body_(std::make_shared<const Body>(parse_template(source))) {}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages,
                                 const ChatOptions& options) const {
  if (!messages.is_array())
    throw TemplateError("messages must be a JSON list of {\"role\", \"content\"} objects");
  Dict variables;
  for (const auto& [k, v] : special_tokens_.items()) variables.set(k, Value::from_json(v));
  for (const auto& [k, v] : options.extra.items()) variables.set(k, Value::from_json(v));
  variables.set("messages", Value::from_json(messages));
  variables.set("add_generation_prompt", Value(options.add_generation_prompt));
  return Renderer(std::move(variables)).render(*body_);
}

namespace {

std::string read_text(const std::string& path, bool& found) {
  std::ifstream in(path, std::ios::binary);
  found = bool(in);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// tokenizer_config.json's tokens are strings or AddedToken objects {"content": ...}.
nlohmann::ordered_json special_tokens_of(const nlohmann::ordered_json& config) {
  nlohmann::ordered_json tokens = nlohmann::ordered_json::object();
  for (const char* name : {"bos_token", "eos_token", "unk_token", "pad_token", "sep_token",
                           "cls_token", "mask_token"}) {
    if (!config.contains(name) || config[name].is_null()) continue;
    const nlohmann::ordered_json& t = config[name];
    if (t.is_string())
      tokens[name] = t;
    else if (t.is_object() && t.contains("content") && t["content"].is_string())
      tokens[name] = t["content"];
  }
  if (config.contains("additional_special_tokens") &&
      config["additional_special_tokens"].is_array())
    tokens["additional_special_tokens"] = config["additional_special_tokens"];
  return tokens;
}

std::string template_of(const nlohmann::ordered_json& config, const std::string& path) {
  if (!config.contains("chat_template"))
    throw TemplateError(path +
                        " has no chat_template (and there is no chat_template.jinja beside it)");
  const nlohmann::ordered_json& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array())
    for (const auto& entry : t)
      if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
          entry["template"].is_string())
        return entry["template"].get<std::string>();
  throw TemplateError(
      path + ": chat_template must be a string or a list holding a template named \"default\"");
}

}  // namespace

namespace {

// A tokenizer directory's template source and tokenizer_config.json (an empty object when
// there is none).
std::pair<std::string, nlohmann::ordered_json> read_directory(const std::string& directory) {
  const std::string config_path = directory + "/tokenizer_config.json";
  bool has_config = false, has_jinja = false;
  const std::string config_text = read_text(config_path, has_config);
  const std::string jinja = read_text(directory + "/chat_template.jinja", has_jinja);
  if (!has_config && !has_jinja)
    throw TemplateError(directory + " has neither tokenizer_config.json nor chat_template.jinja");
  nlohmann::ordered_json config = nlohmann::ordered_json::object();
  if (has_config) {
    config = nlohmann::ordered_json::parse(config_text, nullptr, false);
    if (config.is_discarded() || !config.is_object())
      throw TemplateError(config_path + " is not a JSON object");
  }
  return {has_jinja ? jinja : template_of(config, config_path), config};
}

}  // namespace

ChatTemplate ChatTemplate::from_directory(const std::string& directory) {
  auto [source, config] = read_directory(directory);
  ChatTemplate t(source);
  t.set_special_tokens(special_tokens_of(config));
  return t;
}

std::string ChatTemplate::source_in_directory(const std::string& directory) {
  return read_directory(directory).first;
}

}  // namespace trident::chat_template
