#include "cli/inference_args.h"

#include <cstdint>
#include <filesystem>

namespace trident::cli {

void add_inference_args(CLI::App& app, InferenceArgs* a) {
  generation::InferenceOptions& m = a->model;
  const char* M = "Model";
  app.add_option("--load", m.load, "checkpoint directory (its latest iteration)")->group(M);
  app.add_option("--load-hf", m.load_hf, "HuggingFace GPT-2 directory")->group(M);
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
  const char* T = "Tokenizer";
  app.add_option("--vocab-file", a->vocab_file, "GPT-2 encoder.json (default data/gpt2/)")
      ->group(T);
  app.add_option("--merge-file", a->merge_file, "GPT-2 vocab.bpe (default data/gpt2/)")->group(T);
  app.add_option("--threads", a->threads, "OpenMP threads per rank (0: cores / ranks)");
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
  require(a.vocab_file.empty() == a.merge_file.empty(),
          "--vocab-file and --merge-file go together");
  require(a.threads >= 0, "--threads must be >= 0");
  require(a.distributed_timeout_minutes >= 0,
          "--distributed-timeout-minutes must be >= 0 (0 turns the watchdog off)");
  return errors;
}

LaunchOptions launch_options(const InferenceArgs& a, const std::string& command) {
  LaunchOptions o;
  o.command = command;
  o.distributed_timeout_minutes = a.distributed_timeout_minutes;
  o.allow_tensor_parallel_across_nodes = a.allow_tensor_parallel_across_nodes;
  return o;
}

TokenizerFiles tokenizer_files(const InferenceArgs& a) {
  namespace fs = std::filesystem;
  if (!a.vocab_file.empty()) return {a.vocab_file, a.merge_file};
  const std::string& hf = a.model.load_hf;
  if (!hf.empty() && fs::exists(fs::path(hf) / "vocab.json") &&
      fs::exists(fs::path(hf) / "merges.txt"))
    return {(fs::path(hf) / "vocab.json").string(), (fs::path(hf) / "merges.txt").string()};
  if (fs::exists("data/gpt2/encoder.json") && fs::exists("data/gpt2/vocab.bpe"))
    return {"data/gpt2/encoder.json", "data/gpt2/vocab.bpe"};
  throw std::invalid_argument(
      "no GPT-2 tokenizer: give --vocab-file and --merge-file (scripts/setup.sh puts them in "
      "data/gpt2/)");
}

}  // namespace trident::cli
