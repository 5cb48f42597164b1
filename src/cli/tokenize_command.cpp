#include "cli/tokenize_command.h"

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

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
  app.add_option("--input", input,
                 "text file (or JSONL with --jsonl, ids with --decode); - reads standard input")
      ->required();
  app.add_flag("--jsonl", jsonl, "input is JSONL; print the ids of each document per line");
  app.add_flag("--lines", lines,
               "print the ids of each line of the text file (as spm_encode does); else of the "
               "whole file");
  app.add_option("--json-key", json_key, "JSONL key holding the text")->capture_default_str();
  app.add_flag("--decode", decode, "input holds JSON lists of ids; print their text");
  app.add_flag("--json-output", json_output, "with --decode: print each text as a JSON string");
  app.add_flag("--js-whitespace", options.js_whitespace,
               "ECMAScript \\s (the npm encoders) instead of Unicode White_Space (GPT-2)");
  int code = 0;
  if (!parse_args(app, args, &code)) return code;
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
