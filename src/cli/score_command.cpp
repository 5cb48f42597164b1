#include "cli/score_command.h"

#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "checkpoint/manifest.h"
#include "cli/checkpoint_weights.h"
#include "cli/input_file.h"
#include "cli/parse_args.h"
#include "cli/tokenizer_args.h"
#include "comm/communicator.h"
#include "config/token_flags.h"
#include "core/files.h"
#include "io/hf_gpt2.h"
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
    throw FormatError(options.source() + ": tokenizer has " + std::to_string(tok->vocab_size()) +
                      " tokens, the model only " + std::to_string(vocab_size));
  return {tok->encode(text)};
}

namespace {

struct ScoreArgs {
  std::string load, load_hf, tokens_path, text_path, grads_path;
  tokenizer::TokenizerOptions tokenizer;
  int threads = 0;
  PackedDocuments packed;  // as train's flags: a packed row scores as its documents
};

void add_score_args(CLI::App& app, ScoreArgs* a) {
  auto* load = app.add_option("--load", a->load, "checkpoint directory (its latest iteration)");
  auto* load_hf =
      app.add_option("--load-hf,--model", a->load_hf,
                     "HuggingFace directory (GPT-2, Llama, Mistral, Qwen, Mixtral, Qwen3-MoE)");
  load->excludes(load_hf);
  auto* tokens_opt = app.add_option("--tokens", a->tokens_path,
                                    "JSON list of ids, or list of lists (-: standard input)");
  auto* text_opt = app.add_option(
      "--text", a->text_path, "UTF-8 text file, tokenized by the tokenizer (-: standard input)");
  tokens_opt->excludes(text_opt);
  add_tokenizer_args(app, &a->tokenizer, "Tokenizer (with --text)", kTokenizerDefaultHelp);
  app.add_option("--threads", a->threads, "OpenMP threads (0: all cores)");
  app.add_option("--save-grads", a->grads_path,
                 "also write d(mean loss)/d(weights) as HF-layout safetensors (for parity tests)");
  const char* group = "Packed documents (as train's)";
  app.add_flag("--reset-position-ids", a->packed.reset_position_ids,
               "positions restart after every end-of-document token")
      ->group(group);
  app.add_flag("--reset-attention-mask", a->packed.reset_attention_mask,
               "no token attends across an end-of-document token")
      ->group(group);
  app.add_flag("--eod-mask-loss", a->packed.eod_mask_loss,
               "do not count the prediction made at an end-of-document input")
      ->group(group);
  app.add_option("--eod-id", a->packed.eod, "the end-of-document id (default: the tokenizer's)")
      ->group(group);
}

// --eod-mask-loss: the token after an EOD is not counted as a target (config/token_flags.h);
// returns the targets that count.
long flag_uncounted_targets(std::vector<std::vector<int>>& sequences, const PackedDocuments& p) {
  long counted = 0;
  for (std::vector<int>& seq : sequences)
    for (size_t i = 1; i < seq.size(); ++i) {
      if (p.eod_mask_loss && token_id(seq[i - 1]) == p.eod) seq[i] |= kUncountedTarget;
      counted += counted_target(seq[i]);
    }
  return counted;
}

// Prints the mean loss over every predicted token (and writes its gradient to grads_path).
int score(GPTModel& model, const ModelConfig& config, std::vector<std::vector<int>> sequences,
          const std::string& grads_path, const std::string& input_name,
          const PackedDocuments& packed) {
  const long predicted = flag_uncounted_targets(sequences, packed);
  if (predicted == 0)
    throw FormatError(input_name +
                      ": needs at least one sequence of 2 or more tokens (with a "
                      "target --eod-mask-loss counts)");
  const int window = config.max_positions();
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
}

// The model of --load (a checkpoint, any layout) or --load-hf, one rank, whole.
std::unique_ptr<GPTModel> load_model(const ScoreArgs& a, comm::Communicator& tp,
                                     ModelConfig* config) {
  ChunkOptions options;
  options.packed = a.packed;
  if (a.load.empty()) {
    *config = io::read_hf_config(a.load_hf);
    auto model = std::make_unique<GPTModel>(*config, tp, 1, config->max_positions(), options);
    io::load_hf_weights(a.load_hf, *config, model->parameters());
    return model;
  }
  const Parameters whole = load_checkpoint_weights(a.load, config, std::cerr);
  config->lora = LoraConfig{};  // LoRA adapters come merged into the weights
  auto model = std::make_unique<GPTModel>(*config, tp, 1, config->max_positions(), options);
  Parameters& mine = model->parameters();
  for (const ParamSpec& s : mine.layout().specs()) {
    const ParamSpec& saved = whole.layout().find(s.name);
    std::copy_n(whole.values() + saved.offset, s.numel(), mine.values() + s.offset);
  }
  return model;
}

}  // namespace

int score_main(const std::vector<std::string>& args) {
  CLI::App app("trident score: mean next-token loss of token ids under a model", "trident score");
  ScoreArgs a;
  add_score_args(app, &a);
  int code = 0;
  if (!parse_args(app, args, &code)) return code;
  std::vector<std::string> errors;
  if (a.load.empty() == a.load_hf.empty())
    errors.push_back("give exactly one of --load and --load-hf");
  if (a.tokens_path.empty() == a.text_path.empty())
    errors.push_back("give exactly one of --tokens and --text");
  for (const std::string& e : tokenizer::check_tokenizer_options(a.tokenizer)) errors.push_back(e);
  for (const std::string& e : errors) std::cerr << "trident score: " << e << "\n";
  if (!errors.empty()) return 2;
  if (a.threads > 0) omp_set_num_threads(a.threads);
  try {
    if (a.packed.eod < 0 &&
        (a.packed.reset_position_ids || a.packed.reset_attention_mask || a.packed.eod_mask_loss)) {
      const tokenizer::TokenizerOptions t = resolve_tokenizer(a.tokenizer, a.load, a.load_hf);
      if (!t.given())
        throw FormatError(
            "--reset-position-ids, --reset-attention-mask and --eod-mask-loss need the "
            "end-of-document id: give --eod-id, or a tokenizer");
      a.packed.eod = tokenizer::build_tokenizer(t)->eod();
    }
    comm::SingleRankCommunicator tp("tensor");
    ModelConfig config;
    std::unique_ptr<GPTModel> model = load_model(a, tp, &config);
    const InputFile input(a.tokens_path.empty() ? a.text_path : a.tokens_path);
    std::vector<std::vector<int>> sequences;
    if (a.text_path.empty()) {
      sequences = read_token_file(input.path(), config.vocab_size);
    } else {
      const tokenizer::TokenizerOptions t = resolve_tokenizer(a.tokenizer, a.load, a.load_hf);
      if (!t.given())
        throw FormatError(t.reads_model() ? "--text needs --tokenizer-model"
                                          : "--text needs --vocab-file and --merge-file (the "
                                            "model carries no tokenizer)");
      sequences = read_text_file(input.path(), t, config.vocab_size);
    }
    return score(*model, config, std::move(sequences), a.grads_path,
                 a.tokens_path.empty() ? a.text_path : a.tokens_path, a.packed);
  } catch (const FormatError& e) {
    std::cerr << "trident score: " << e.what() << "\n";
    return 2;
  } catch (const checkpoint::CheckpointError& e) {
    std::cerr << "trident score: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "trident score: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace trident::cli
