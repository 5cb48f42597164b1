#include "cli/score_command.h"

#include <omp.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/parse_args.h"
#include "cli/tokenizer_args.h"
#include "comm/communicator.h"
#include "io/hf_gpt2.h"
#include "core/files.h"
#include "model/gpt_model.h"
#include "tokenizer/build_tokenizer.h"
#include "tokenizer/unicode_classes.h"

namespace trident::cli {

std::vector<std::vector<int>> read_token_file(const std::string& path, int vocab_size) {
  auto fail = [&](const std::string& why) { throw FormatError(path + ": " + why); };
  std::ifstream in(path);
  if (!in) fail("cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    fail(std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_array()) fail("expected a JSON list of token ids or a list of lists");
  std::vector<std::vector<int>> sequences;
  bool nested = !j.empty() && j[0].is_array();
  auto read_seq = [&](const nlohmann::json& list, size_t which) {
    if (!list.is_array()) fail("entry " + std::to_string(which) + " is not a list");
    std::vector<int> seq;
    for (size_t i = 0; i < list.size(); ++i) {
      const auto& v = list[i];
      if (!v.is_number_integer() || v.get<long>() < 0 || v.get<long>() >= vocab_size)
        fail("token " + std::to_string(i) +
             (nested ? " of sequence " + std::to_string(which) : "") + " is " + v.dump() +
             ", not an id in [0, " + std::to_string(vocab_size) + ")");
      seq.push_back(v.get<int>());
    }
    return seq;
  };
  if (nested)
    for (size_t s = 0; s < j.size(); ++s) sequences.push_back(read_seq(j[s], s));
  else
    sequences.push_back(read_seq(j, 0));
  return sequences;
}

std::vector<std::vector<int>> read_text_file(const std::string& path,
                                             const tokenizer::TokenizerOptions& options,
                                             int vocab_size) {
  std::string text;
  std::unique_ptr<tokenizer::Tokenizer> tok;
  try {
    text = tokenizer::read_utf8_file(path);
    tok = tokenizer::build_tokenizer(options);
  } catch (const std::exception& e) {
    throw FormatError(e.what());  // bad input: exit code 2
  }
  if (tok->vocab_size() > vocab_size)
    throw FormatError(options.source() + ": tokenizer has " +
                          std::to_string(tok->vocab_size()) + " tokens, the model only " +
                          std::to_string(vocab_size));
  return {tok->encode(text)};
}

int score_main(const std::vector<std::string>& args) {
  CLI::App app("trident score: mean next-token loss of token ids under a model", "trident score");
  std::string model_dir, tokens_path, text_path, grads_path;
  tokenizer::TokenizerOptions tokenizer_options;
  int threads = 0;
  app.add_option("--model", model_dir, "HuggingFace GPT-2 model directory")->required();
  auto* tokens_opt = app.add_option("--tokens", tokens_path, "JSON list of ids, or list of lists");
  auto* text_opt =
      app.add_option("--text", text_path, "UTF-8 text file, tokenized by the tokenizer flags");
  tokens_opt->excludes(text_opt);
  add_tokenizer_args(app, &tokenizer_options, "Tokenizer (with --text)");
  app.add_option("--threads", threads, "OpenMP threads (0: all cores)");
  app.add_option("--save-grads", grads_path,
                 "also write d(mean loss)/d(weights) as HF-layout safetensors (for parity tests)");
  int code = 0;
  if (!parse_args(app, args, &code)) return code;
  if (tokens_path.empty() == text_path.empty()) {
    std::cerr << "trident score: give exactly one of --tokens and --text\n";
    return 2;
  }
  std::vector<std::string> errors = tokenizer::check_tokenizer_options(tokenizer_options);
  if (!text_path.empty() && errors.empty() && !tokenizer_options.given())
    errors.push_back(tokenizer_options.sentencepiece()
                         ? "--text needs --tokenizer-model"
                         : "--text needs --vocab-file and --merge-file");
  for (const std::string& e : errors) std::cerr << "trident score: " << e << "\n";
  if (!errors.empty()) return 2;
  if (threads > 0) omp_set_num_threads(threads);
  try {
    ModelConfig config = io::read_hf_config(model_dir);
    std::vector<std::vector<int>> sequences =
        text_path.empty() ? read_token_file(tokens_path, config.vocab_size)
                          : read_text_file(text_path, tokenizer_options, config.vocab_size);
    long predicted = 0;
    for (const auto& s : sequences) predicted += s.size() > 1 ? (long)s.size() - 1 : 0;
    if (predicted == 0)
      throw FormatError(tokens_path + ": needs at least one sequence of 2 or more tokens");
    const int window = config.max_positions();
    comm::SingleRankCommunicator tp("tensor");
    GPTModel model(config, tp, 1, window);
    io::load_hf_weights(model_dir, config, model.parameters());
    model.parameters().zero_grads();
    double total = 0;
    const float grad_scale = 1.f / (float)predicted;
    // Windows of up to n_positions + 1 tokens sharing their boundary token, so every token
    // after the first of a sequence is predicted exactly once.
    for (const auto& seq : sequences)
      for (size_t start = 0; start + 1 < seq.size(); start += window) {
        int len = (int)std::min<size_t>(window, seq.size() - 1 - start);
        const int* chunk = seq.data() + start;
        total += grads_path.empty() ? model.forward(chunk, 1, len)
                                    : model.forward_backward(chunk, 1, len, grad_scale);
      }
    double loss = total / predicted;
    nlohmann::ordered_json out = {
        {"tokens", predicted}, {"loss", loss}, {"perplexity", std::exp(loss)}};
    std::cout << out.dump() << std::endl;
    if (!grads_path.empty()) io::save_hf_model(grads_path, config, model.parameters(), true);
    return 0;
  } catch (const FormatError& e) {
    std::cerr << "trident score: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "trident score: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace trident::cli
