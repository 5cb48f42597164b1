// trident: Megatron-style GPT training on CPUs. One binary, subcommands.
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "cli/convert_command.h"
#include "cli/curate_command.h"
#include "cli/eval_command.h"
#include "cli/generate_command.h"
#include "cli/inspect_data_command.h"
#include "cli/plan_command.h"
#include "cli/preprocess_command.h"
#include "cli/report_command.h"
#include "cli/schedule_command.h"
#include "cli/score_command.h"
#include "cli/serve_command.h"
#include "cli/suggest.h"
#include "cli/tokenize_command.h"
#include "cli/train_command.h"

// TRIDENT_VERSION: CMake's project version and `git describe` at configure time.
#ifndef TRIDENT_VERSION
#define TRIDENT_VERSION "unknown"
#endif

namespace {

void usage(std::ostream& os) {
  os << "usage: trident <command> [flags]\n\n"
        "commands:\n"
        "  train   train a GPT model (Megatron-LM flags; --help lists them)\n"
        "  generate  continue prompts (KV cache; greedy, temperature, top-k, top-p)\n"
        "  serve   HTTP generation server (Megatron PUT /api, OpenAI /v1/completions)\n"
        "  eval    zero/few-shot tasks (lambada, piqa, hellaswag, ...) as lm-evaluation-harness\n"
        "  score   mean next-token loss and perplexity of token ids under a model\n"
        "  tokenize  GPT-2 BPE ids of text (or text of ids)\n"
        "  curate  data curation: language ID, quality, dedup, decontamination (JSONL)\n"
        "  preprocess  JSONL corpus -> Megatron .bin/.idx dataset\n"
        "  inspect-data  summary and contents of a .bin/.idx dataset\n"
        "  schedule  print, simulate and draw a pipeline schedule (GPipe, 1F1B, interleaved)\n"
        "  report  a run's metrics, memory plan and timeline as one HTML page (or live)\n"
        "  plan    pick and launch (t, p, d, b, v) for a model on a cluster (PTD-P model)\n"
        "  convert   checkpoint <-> HuggingFace GPT-2 directory\n\n"
        "trident --version prints the version; trident <command> --help, the command's flags.\n";
}

// The commands in usage's order: name and entry point.
using CommandMain = int (*)(const std::vector<std::string>&);
const std::vector<std::pair<std::string, CommandMain>>& commands() {
  namespace cli = trident::cli;
  static const std::vector<std::pair<std::string, CommandMain>> table = {
      {"train", cli::train_main},
      {"generate", cli::generate_main},
      {"serve", cli::serve_main},
      {"eval", cli::eval_main},
      {"score", cli::score_main},
      {"tokenize", cli::tokenize_main},
      {"curate", cli::curate_main},
      {"preprocess", cli::preprocess_main},
      {"inspect-data", cli::inspect_data_main},
      {"schedule", cli::schedule_main},
      {"report", cli::report_main},
      {"plan", cli::plan_main},
      {"convert", cli::convert_main}};
  return table;
}

int unknown_command(const std::string& command) {
  std::vector<std::string> names;
  for (const auto& [name, run] : commands()) names.push_back(name);
  const std::string meant = trident::cli::nearest_name(command, names);
  std::cerr << "trident: unknown command '" << command << "'"
            << (meant.empty() ? "" : "; did you mean '" + meant + "'?") << "\n";
  usage(std::cerr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(std::cerr);
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  for (const auto& [name, run] : commands())
    if (command == name) return run(args);
  if (command == "--help" || command == "-h" || command == "help") {
    usage(std::cout);
    return 0;
  }
  if (command == "--version" || command == "version") {
    std::cout << "trident " << TRIDENT_VERSION << "\n";
    return 0;
  }
  return unknown_command(command);
}
