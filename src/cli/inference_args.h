#pragma once
// The flags `generate` and `serve` share: where the model comes from, its layout, the KV
// cache plan, precision, the tokenizer and threads. Checked once by check_inference_args.
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "cli/mpi_job.h"
#include "generation/inference_model.h"
#include "tokenizer/build_tokenizer.h"

namespace trident::cli {

struct InferenceArgs {
  generation::InferenceOptions model;
  tokenizer::TokenizerOptions tokenizer;    // GPT-2's files default as tokenizer_options says
  bool no_huge_pages = false;               // --no-huge-pages (core/first_touch.h)
  int threads = 0;                          // OpenMP threads per rank (0: the node's cores / ranks)
  double distributed_timeout_minutes = 10;  // a step's wait on other ranks (0: unwatched)
  bool allow_tensor_parallel_across_nodes = false;
};

// The launch options of a command from its flags; command prefixes a hang report.
LaunchOptions launch_options(const InferenceArgs& a, const std::string& command);

void add_inference_args(CLI::App& app, InferenceArgs* a);
// --threads (0: the node's cores / its ranks) and --no-huge-pages, for this process.
void apply_inference_runtime(const InferenceArgs& a, const std::vector<std::string>& nodes,
                             int world_rank);

// Empty when the flags are consistent for a world of world_size ranks, else every rule
// broken, one per line. With data_parallel, t x p need only divide the world (eval runs one
// model replica per t x p ranks); generate and serve run one replica.
std::string check_inference_args(const InferenceArgs& a, int world_size,
                                 bool data_parallel = false);

// The tokenizer flags with the files filled in when not given, as resolve_tokenizer finds
// them (the --load checkpoint's, the --load-hf directory's, the installation's data/gpt2/).
tokenizer::TokenizerOptions tokenizer_options(const InferenceArgs& a);
// build_tokenizer(tokenizer_options(a)), refused when it has more tokens than the model's
// vocabulary (std::invalid_argument, naming the tokenizer's file).
std::unique_ptr<tokenizer::Tokenizer> build_inference_tokenizer(const InferenceArgs& a,
                                                                int model_vocab);

}  // namespace trident::cli
