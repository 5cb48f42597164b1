#include "cli/inference_args.h"

#include <omp.h>

#include <cstdint>

#include "cli/tokenizer_args.h"
#include "core/first_touch.h"

namespace trident::cli {

void add_inference_args(CLI::App& app, InferenceArgs* a) {
  generation::InferenceOptions& m = a->model;
  const char* M = "Model";
  app.add_option("--load", m.load, "checkpoint directory (its latest iteration)")->group(M);
  app.add_option("--load-hf", m.load_hf,
                 "HuggingFace directory (GPT-2, Llama, Mistral, Qwen, Mixtral, Qwen3-MoE)")
      ->group(M);
  app.add_option("--tensor-model-parallel-size", m.tensor_model_parallel_size,
                 "tensor-parallel ranks (t x p must equal the MPI ranks)")
      ->group(M);
  app.add_option("--pipeline-model-parallel-size", m.pipeline_model_parallel_size,
                 "pipeline stages")
      ->group(M);
  app.add_option("--distributed-timeout-minutes", a->distributed_timeout_minutes,
                 "a wait on other ranks inside a step longer than this ends the job with a "
                 "diagnosis (fractions allowed; 0: off; idle ranks between requests wait freely)")
      ->group(M)
      ->capture_default_str();
  app.add_flag("--allow-tensor-parallel-across-nodes", a->allow_tensor_parallel_across_nodes,
               "let a tensor-parallel group span nodes (refused by default)")
      ->group(M);
  app.add_flag("--bf16", m.bf16, "bf16 matrix products and KV cache")->group(M);
  app.add_flag_function(
         "--no-decode-panels", [&m](std::int64_t) { m.decode_panels = false; },
         "do not keep the second, panel-layout copy of the linear weights (saves their memory; "
         "batched decoding is then slower)")
      ->group(M);
  const char* C = "KV cache";
  app.add_option("--max-batch", m.max_batch, "sequences decoded at once (cache slots)")
      ->group(C)
      ->capture_default_str();
  app.add_option("--max-sequence-length", m.max_sequence_length,
                 "positions per slot, prompt included (default: the model's)")
      ->group(C);
  add_tokenizer_args(app, &a->tokenizer, "Tokenizer", kTokenizerDefaultHelp);
  app.add_option("--threads", a->threads, "OpenMP threads per rank (0: cores / ranks)");
  app.add_flag("--no-huge-pages", a->no_huge_pages,
               "do not ask for transparent huge pages for the weights and the KV cache");
}

std::string check_inference_args(const InferenceArgs& a, int world_size, bool data_parallel) {
  std::string errors;
  auto require = [&](bool ok, const std::string& why) {
    if (!ok) errors += why + "\n";
  };
  const generation::InferenceOptions& m = a.model;
  require(m.load.empty() != m.load_hf.empty(), "give exactly one of --load CKPT and --load-hf DIR");
  require(m.tensor_model_parallel_size >= 1 && m.pipeline_model_parallel_size >= 1,
          "--tensor-model-parallel-size and --pipeline-model-parallel-size must be >= 1");
  const int model_ranks = m.tensor_model_parallel_size * m.pipeline_model_parallel_size;
  if (data_parallel)
    require(model_ranks >= 1 && world_size % model_ranks == 0,
            "--tensor-model-parallel-size x --pipeline-model-parallel-size (" +
                std::to_string(model_ranks) + ") must divide the number of MPI ranks (" +
                std::to_string(world_size) + ")");
  else
    require(model_ranks == world_size,
            "--tensor-model-parallel-size x --pipeline-model-parallel-size (" +
                std::to_string(model_ranks) + ") must equal the number of MPI ranks (" +
                std::to_string(world_size) + "): generation has no data parallelism");
  require(m.max_batch >= 1 && m.max_batch <= 4096, "--max-batch must be in [1, 4096]");
  require(m.max_sequence_length >= 0, "--max-sequence-length must be >= 0");
  for (const std::string& e : tokenizer::check_tokenizer_options(a.tokenizer)) require(false, e);
  require(a.threads >= 0, "--threads must be >= 0");
  require(a.distributed_timeout_minutes >= 0,
          "--distributed-timeout-minutes must be >= 0 (0 turns the watchdog off)");
  return errors;
}

void apply_inference_runtime(const InferenceArgs& a, const std::vector<std::string>& nodes,
                             int world_rank) {
  omp_set_num_threads(a.threads > 0 ? a.threads : default_threads(nodes, world_rank));
  if (a.no_huge_pages) disable_huge_pages();
}

LaunchOptions launch_options(const InferenceArgs& a, const std::string& command) {
  LaunchOptions o;
  o.command = command;
  o.distributed_timeout_minutes = a.distributed_timeout_minutes;
  o.allow_tensor_parallel_across_nodes = a.allow_tensor_parallel_across_nodes;
  return o;
}

tokenizer::TokenizerOptions tokenizer_options(const InferenceArgs& a) {
  return resolve_tokenizer(a.tokenizer, a.model.load, a.model.load_hf);
}

std::unique_ptr<tokenizer::Tokenizer> build_inference_tokenizer(const InferenceArgs& a,
                                                                int model_vocab) {
  const tokenizer::TokenizerOptions o = tokenizer_options(a);
  if (!o.given() && !o.reads_model())
    throw std::invalid_argument(
        "no tokenizer: the model carries none; give --vocab-file and --merge-file "
        "(scripts/setup.sh puts GPT-2's in data/gpt2/), or --tokenizer-type "
        "SentencePieceTokenizer --tokenizer-model M");
  std::unique_ptr<tokenizer::Tokenizer> tok = tokenizer::build_tokenizer(o);
  if (tok->vocab_size() > model_vocab)
    throw std::invalid_argument(o.source() + ": the tokenizer has " +
                                std::to_string(tok->vocab_size()) + " tokens, the model only " +
                                std::to_string(model_vocab));
  return tok;
}

}  // namespace trident::cli
