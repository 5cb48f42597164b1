// trident: Megatron-style GPT training on CPUs. One binary, subcommands.
#include <iostream>
#include <string>
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
#include "cli/tokenize_command.h"
#include "cli/train_command.h"

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
        "  convert   checkpoint <-> HuggingFace GPT-2 directory\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(std::cerr);
    return 2;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "train") return trident::cli::train_main(args);
  if (command == "generate") return trident::cli::generate_main(args);
  if (command == "serve") return trident::cli::serve_main(args);
  if (command == "eval") return trident::cli::eval_main(args);
  if (command == "score") return trident::cli::score_main(args);
  if (command == "tokenize") return trident::cli::tokenize_main(args);
  if (command == "curate") return trident::cli::curate_main(args);
  if (command == "preprocess") return trident::cli::preprocess_main(args);
  if (command == "inspect-data") return trident::cli::inspect_data_main(args);
  if (command == "schedule") return trident::cli::schedule_main(args);
  if (command == "report") return trident::cli::report_main(args);
  if (command == "plan") return trident::cli::plan_main(args);
  if (command == "convert") return trident::cli::convert_main(args);
  if (command == "--help" || command == "-h" || command == "help") {
    usage(std::cout);
    return 0;
  }
  std::cerr << "trident: unknown command '" << command << "'\n";
  usage(std::cerr);
  return 2;
}
