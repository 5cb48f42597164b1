#pragma once
// The chat template `trident serve` renders /v1/chat/completions with, found once at
// start-up: --chat-template's (a Jinja file, or a directory holding tokenizer_config.json or
// chat_template.jinja), else the model's own (its HuggingFace tokenizer's directory, then
// the --load-hf directory). A serve without one still answers the other routes.
#include <iosfwd>
#include <string>

#include "cli/inference_args.h"
#include "serve/service.h"

namespace trident::cli {

struct ServeChatFlags {
  std::string template_path;  // --chat-template; "": the model's
  std::string kwargs = "{}";  // --chat-template-kwargs: a JSON object of extra variables
};

void add_serve_chat_args(CLI::App& app, ServeChatFlags* f);

// The template and its variables. A FormatError when --chat-template cannot be read or
// does not parse, or --chat-template-kwargs is not a JSON object (exit 2 at start-up). The
// model's own template that does not parse is reported on `log` and left out (its reason in
// ChatSetup::missing), so the model is still served; so is where the template came from.
serve::ChatSetup serve_chat_setup(const ServeChatFlags& f, const InferenceArgs& inference,
                                  std::ostream& log);

}  // namespace trident::cli
