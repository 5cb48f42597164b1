#pragma once
// Everything `trident train` needs, parsed once from the command line (and an optional
// TOML config file) and validated once; nothing downstream re-reads flags.
#include <cstdint>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "optim/adamw.h"

namespace trident {

struct TrainingConfig {
  ModelConfig model;
  std::string model_preset;  // --model-preset, applied before explicit shape flags

  int tensor_model_parallel_size = 1;
  int pipeline_model_parallel_size = 1;
  int world_size = 1;  // set by the launcher, not a flag

  int micro_batch_size = 4;
  int global_batch_size = 0;  // 0: micro_batch_size * data-parallel size

  long train_iters = 100;
  float lr = 6e-4f;
  float min_lr = 0.f;
  std::string lr_decay_style = "cosine";
  long lr_warmup_iters = 0;
  long lr_decay_iters = 0;  // 0: train_iters
  AdamWConfig adam;

  std::uint64_t seed = 1234;
  int log_interval = 10;
  long eval_interval = 0;  // 0: validate only at the end
  int eval_iters = 4;

  bool mock_data = false;
  std::vector<std::string> data_path;

  std::string metrics_file;
  std::string load_hf;
  std::string save_hf;
  int threads = 0;         // 0: OpenMP's default
  double peak_tflops = 0;  // 0: measure the fp32 GEMM peak at start

  int data_parallel_size() const;
  int num_micro_batches() const;
  int effective_global_batch() const;
  long effective_decay_iters() const { return lr_decay_iters > 0 ? lr_decay_iters : train_iters; }
};

// Every violated rule, each naming the flag(s) and the rule; empty when valid.
std::vector<std::string> validate_training_config(const TrainingConfig& c);

}  // namespace trident
