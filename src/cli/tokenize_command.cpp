#include "cli/tokenize_command.h"

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat_template/chat_template.h"
#include "cli/chat_template_args.h"
#include "cli/input_file.h"
#include "cli/parse_args.h"
#include "cli/tokenizer_args.h"
#include "tokenizer/build_tokenizer.h"
#include "tokenizer/unicode_classes.h"

namespace trident::cli {

namespace {

void print_ids(const std::vector<int>& ids) {
  std::string line = "[";
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
  std::cout << line << "]\n";
}

struct ChatFlags {
  ChatTemplateFlags source;
  bool render_only = false;
  chat_template::ChatOptions options;
};

void add_chat_flags(CLI::App& app, ChatFlags* f) {
  add_chat_template_args(app, &f->source,
                         "with --jsonl: render each line's conversation (--json-key, default "
                         "messages: a list of {role, content}) with the model's chat template, "
                         "as HF's apply_chat_template, and print its ids");
  app.add_flag("--add-generation-prompt", f->options.add_generation_prompt,
               "end the render with the template's prompt for the assistant's reply")
      ->group("Chat templates");
  app.add_flag("--render-only", f->render_only,
               "with --apply-chat-template: print each render as a JSON string, not its ids")
      ->group("Chat templates");
}

// One JSONL line's conversation rendered with the template; its "tools" and "documents"
// join the variables.
std::string render_line(const chat_template::ChatTemplate& t, const ChatFlags& f,
                        const nlohmann::ordered_json& line, const std::string& key,
                        const std::string& where) {
  if (!line.contains(key) || !line[key].is_array())
    throw std::runtime_error(where + ": not a JSON object with a list \"" + key + "\"");
  chat_template::ChatOptions options = f.options;
  options.extra = chat_template_kwargs(f.source);
  for (const char* extra : {"tools", "documents"})
    if (line.contains(extra)) options.extra[extra] = line[extra];
  try {
    return t.render(line[key], options);
  } catch (const chat_template::TemplateError& e) {
    throw std::runtime_error(where + ": chat template: " + e.what());
  }
}

int apply_chat_template(const ChatFlags& f, const tokenizer::TokenizerOptions& options,
                        const tokenizer::Tokenizer& tok, std::istream& in, const std::string& input,
                        const std::string& key) {
  const chat_template::ChatTemplate t = load_chat_template(f.source, options);
  std::string line;
  long line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::string where = input + ":" + std::to_string(line_no);
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) throw std::runtime_error(where + ": not a JSON object");
    const std::string text = render_line(t, f, j, key, where);
    if (f.render_only)
      std::cout << nlohmann::json(text).dump() << "\n";
    else
      print_ids(tok.encode(text));
  }
  return 0;
}

}  // namespace

int tokenize_main(const std::vector<std::string>& args) {
  CLI::App app(
      "trident tokenize: encode or decode with GPT-2 BPE, SentencePiece or a HuggingFace "
      "tokenizer.json",
      "trident tokenize");
  tokenizer::TokenizerOptions options;
  std::string input, json_key = "text";
  bool jsonl = false, lines = false, decode = false, json_output = false;
  add_tokenizer_args(app, &options, "Tokenizer", "the installation's data/gpt2/");
  ChatFlags chat;
  add_chat_flags(app, &chat);
  app.add_option("--input", input,
                 "text file (or JSONL with --jsonl, ids with --decode); - reads standard input")
      ->required();
  app.add_flag("--jsonl", jsonl, "input is JSONL; print the ids of each document per line");
  app.add_flag("--lines", lines,
               "print the ids of each line of the text file (as spm_encode does); else of the "
               "whole file");
  CLI::Option* key_option =
      app.add_option("--json-key", json_key, "JSONL key holding the text")->capture_default_str();
  app.add_flag("--decode", decode, "input holds JSON lists of ids; print their text");
  app.add_flag("--json-output", json_output, "with --decode: print each text as a JSON string");
  app.add_flag("--js-whitespace", options.js_whitespace,
               "ECMAScript \\s (the npm encoders) instead of Unicode White_Space (GPT-2)");
  int code = 0;
  if (!parse_args(app, args, &code)) return code;
  if (chat.source.apply && (!jsonl || decode || lines)) {
    std::cerr << "trident tokenize: --apply-chat-template reads conversations: give --jsonl "
                 "(and not --decode or --lines)\n";
    return 2;
  }
  if ((chat.render_only || chat.options.add_generation_prompt ||
       !chat.source.template_path.empty()) &&
      !chat.source.apply) {
    std::cerr << "trident tokenize: --render-only, --add-generation-prompt and --chat-template "
                 "need --apply-chat-template\n";
    return 2;
  }
  if (chat.source.apply && key_option->count() == 0) json_key = "messages";
  try {
    const std::unique_ptr<tokenizer::Tokenizer> built =
        tokenizer::build_tokenizer(resolve_tokenizer(options));
    const tokenizer::Tokenizer& tok = *built;
    const InputFile spooled(input);
    input = spooled.path();
    std::ifstream in(input, std::ios::binary);
    if (!in) throw std::runtime_error(input + ": cannot open");
    if (decode) {
      std::string line;
      while (std::getline(in, line)) {
        if (line.empty()) continue;
        std::string text = tok.decode(nlohmann::json::parse(line).get<std::vector<int>>());
        std::cout << (json_output ? nlohmann::json(text).dump() : text) << "\n";
      }
      return 0;
    }
    if (lines) {
      std::istringstream text(tokenizer::read_utf8_file(input));
      for (std::string line; std::getline(text, line);) print_ids(tok.encode(line));
      return 0;
    }
    if (!jsonl) {
      print_ids(tok.encode(tokenizer::read_utf8_file(input)));
      return 0;
    }
    if (chat.source.apply)
      return apply_chat_template(chat, resolve_tokenizer(options), tok, in, input, json_key);
    std::string line;
    long line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object() || !j.contains(json_key) || !j[json_key].is_string())
        throw std::runtime_error(input + ":" + std::to_string(line_no) +
                                 ": not a JSON object with a string \"" + json_key + "\"");
      print_ids(tok.encode(j[json_key].get<std::string>()));
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "trident tokenize: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace trident::cli
