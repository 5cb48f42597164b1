#include "cli/chat_template_args.h"

#include <fstream>
#include <sstream>

namespace trident::cli {

void add_chat_template_args(CLI::App& app, ChatTemplateFlags* f, const std::string& apply_help) {
  const char* group = "Chat templates";
  app.add_flag("--apply-chat-template", f->apply, apply_help)->group(group);
  app.add_option("--chat-template", f->template_path,
                 "a Jinja file, or a directory with tokenizer_config.json or "
                 "chat_template.jinja (default: the --tokenizer-model directory)")
      ->group(group);
  app.add_option("--chat-template-kwargs", f->kwargs,
                 "a JSON object of extra template variables, e.g. '{\"enable_thinking\": "
                 "false}'; a line's own \"tools\" and \"documents\" are passed too")
      ->group(group);
}

chat_template::ChatTemplate load_chat_template(const ChatTemplateFlags& f,
                                               const tokenizer::TokenizerOptions& tok) {
  std::string where = f.template_path;
  if (where.empty()) {
    where = tok.tokenizer_model;
    if (where.size() > 5 && where.substr(where.size() - 5) == ".json") {
      const size_t slash = where.find_last_of('/');
      where = slash == std::string::npos ? "." : where.substr(0, slash);
    }
    if (where.empty())
      throw std::runtime_error(
          "--apply-chat-template: give --chat-template, or a HuggingFace --tokenizer-model "
          "whose directory holds tokenizer_config.json");
  }
  std::ifstream config(where + "/tokenizer_config.json");
  std::ifstream jinja(where + "/chat_template.jinja");
  if (config || jinja) return chat_template::ChatTemplate::from_directory(where);
  std::ifstream file(where, std::ios::binary);
  if (!file) throw std::runtime_error("--chat-template " + where + ": cannot open");
  std::ostringstream text;
  text << file.rdbuf();
  return chat_template::ChatTemplate(text.str());
}

nlohmann::ordered_json chat_template_kwargs(const ChatTemplateFlags& f) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(f.kwargs, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw std::runtime_error("--chat-template-kwargs must be a JSON object (got " + f.kwargs + ")");
  return j;
}

}  // namespace trident::cli
