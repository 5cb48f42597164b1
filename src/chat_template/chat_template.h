#pragma once
// A model's chat template, rendered as HuggingFace's apply_chat_template renders it: Jinja
// with trim_blocks and lstrip_blocks in an immutable sandbox, loop controls, HF's tojson
// (json.dumps, non-ASCII kept), raise_exception and strftime_now, and the variables
// messages, tools, add_generation_prompt and the tokenizer's special tokens.
// No C++ Jinja library is packaged in Debian; this is the subset published templates use
// (tests/reference/chat_template_test.py checks it against Jinja itself).
#include <nlohmann/json.hpp>
#include <string>

#include "chat_template/syntax.h"

namespace trident::chat_template {

struct ChatOptions {
  bool add_generation_prompt = false;
  // Extra variables: "tools", "documents", "enable_thinking", anything the template reads.
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
};

class ChatTemplate {
 public:
  // A TemplateError for a template that does not parse or uses what is not supported.
  explicit ChatTemplate(const std::string& source);

  // `special_tokens`: name -> string (bos_token, eos_token, ...), as HF passes them.
  void set_special_tokens(nlohmann::ordered_json special_tokens) {
    special_tokens_ = std::move(special_tokens);
  }

  // The conversation rendered; a TemplateError (raise_exception's included) otherwise.
  std::string render(const nlohmann::ordered_json& messages, const ChatOptions& options) const;

  // The template of a HuggingFace tokenizer directory: chat_template.jinja, or
  // tokenizer_config.json's "chat_template" (a string, or the entry named "default"), with
  // the special tokens of tokenizer_config.json. A TemplateError names what is missing.
  static ChatTemplate from_directory(const std::string& directory);
  // The same directory's template text, unparsed (what a GGUF file's tokenizer.chat_template
  // carries); the same TemplateError when it has none.
  static std::string source_in_directory(const std::string& directory);

 private:
  std::shared_ptr<const Body> body_;
  nlohmann::ordered_json special_tokens_ = nlohmann::ordered_json::object();
};

}  // namespace trident::chat_template
