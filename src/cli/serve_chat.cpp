#include "cli/serve_chat.h"

#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>

#include "cli/chat_template_args.h"
#include "core/files.h"

namespace trident::cli {

namespace {

namespace fs = std::filesystem;

using Template = chat_template::ChatTemplate;

// The directories that may hold the model's template: the HF tokenizer's, then --load-hf.
std::vector<std::string> model_directories(const InferenceArgs& a) {
  std::vector<std::string> dirs;
  const tokenizer::TokenizerOptions t = tokenizer_options(a);
  if (t.huggingface() && !t.tokenizer_model.empty()) {
    const fs::path p = t.tokenizer_model;
    dirs.push_back(fs::is_directory(p) ? p.string() : p.parent_path().string());
  }
  if (!a.model.load_hf.empty()) dirs.push_back(a.model.load_hf);
  return dirs;
}

// Whether a directory offers a template at all: chat_template.jinja, or a
// tokenizer_config.json that names one.
bool offers_template(const std::string& dir) {
  if (fs::is_regular_file(fs::path(dir) / "chat_template.jinja")) return true;
  const fs::path config = fs::path(dir) / "tokenizer_config.json";
  if (!fs::is_regular_file(config)) return false;
  std::ifstream in(config);
  std::ostringstream text;
  text << in.rdbuf();
  const auto j = nlohmann::ordered_json::parse(text.str(), nullptr, false);
  return j.is_object() && j.contains("chat_template") && !j["chat_template"].is_null();
}

const char* kHowToGive =
    "give the server one with --chat-template FILE (a Jinja file, e.g. configs/chatml.jinja, "
    "or a directory holding tokenizer_config.json or chat_template.jinja)";

}  // namespace

void add_serve_chat_args(CLI::App& app, ServeChatFlags* f) {
  const char* group = "Chat templates";
  app.add_option("--chat-template", f->template_path,
                 "the chat template /v1/chat/completions renders messages with: a Jinja file, "
                 "or a directory with tokenizer_config.json or chat_template.jinja (default: "
                 "the model's, from its HuggingFace tokenizer or --load-hf directory)")
      ->group(group);
  app.add_option("--chat-template-kwargs", f->kwargs,
                 "a JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'")
      ->group(group);
}

serve::ChatSetup serve_chat_setup(const ServeChatFlags& f, const InferenceArgs& inference,
                                  std::ostream& log) {
  serve::ChatSetup chat;
  ChatTemplateFlags flags;
  flags.template_path = f.template_path;
  flags.kwargs = f.kwargs;
  try {
    chat.kwargs = chat_template_kwargs(flags);
  } catch (const std::runtime_error& e) {
    throw FormatError(e.what());
  }
  if (!f.template_path.empty()) {
    try {
      chat.chat_template = std::make_shared<const Template>(load_chat_template(flags, {}));
    } catch (const std::exception& e) {  // unreadable, or a TemplateError
      const std::string why = e.what();
      throw FormatError(why.rfind("--chat-template", 0) == 0
                            ? why
                            : "--chat-template " + f.template_path + ": " + why);
    }
    log << "trident serve: chat template " << f.template_path << std::endl;
    return chat;
  }
  for (const std::string& dir : model_directories(inference)) {
    if (!offers_template(dir)) continue;
    try {
      chat.chat_template = std::make_shared<const Template>(Template::from_directory(dir));
      log << "trident serve: chat template of " << dir << std::endl;
    } catch (const std::exception& e) {
      chat.missing =
          "the model's chat template (" + dir + ") cannot be used: " + e.what() + "; " + kHowToGive;
      log << "trident serve: no chat completions: " << chat.missing << std::endl;
    }
    return chat;
  }
  chat.missing =
      std::string("this server has no chat template (the model has none); ") + kHowToGive;
  return chat;
}

}  // namespace trident::cli
