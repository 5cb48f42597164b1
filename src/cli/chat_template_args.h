#pragma once
// The chat-template flags tokenize and preprocess share, and where the template comes from.
#include <CLI/CLI.hpp>
#include <string>

#include "chat_template/chat_template.h"
#include "tokenizer/build_tokenizer.h"

namespace trident::cli {

struct ChatTemplateFlags {
  bool apply = false;
  std::string template_path;  // a Jinja file or a tokenizer directory; "": the tokenizer's
  std::string kwargs = "{}";  // a JSON object of extra template variables
};

// --apply-chat-template (its help given by the command), --chat-template,
// --chat-template-kwargs, in the group "Chat templates".
void add_chat_template_args(CLI::App& app, ChatTemplateFlags* f, const std::string& apply_help);

// The template: --chat-template's file or directory, else the directory of the
// HuggingFace --tokenizer-model. A std::runtime_error names a path that cannot be read, a
// chat_template::TemplateError a template that does not parse.
chat_template::ChatTemplate load_chat_template(const ChatTemplateFlags& f,
                                               const tokenizer::TokenizerOptions& tok);

// --chat-template-kwargs as a JSON object, or a std::runtime_error naming the flag.
nlohmann::ordered_json chat_template_kwargs(const ChatTemplateFlags& f);

}  // namespace trident::cli
