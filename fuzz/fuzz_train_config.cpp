// `trident train --config FILE`: CLI11's TOML reader, every flag's conversion and the whole
// validation (validate_training_config) on arbitrary config files. An invalid config is
// answered with exit code 2 and messages, never an exception or a crash.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "cli/train_args.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  using namespace trident;
  const std::string text(reinterpret_cast<const char*>(data), size);
  // A config may name files the parser then reads (--load-hf, --vocab-file); a device or
  // kernel file there would block or never end, which is no parser bug.
  for (const char* dir : {"/dev", "/proc", "/sys"})
    if (text.find(dir) != std::string::npos) return -1;
  static const std::string path =
      "/tmp/trident_fuzz_train_config_" + std::to_string(::getpid()) + ".toml";
  std::ofstream(path, std::ios::binary) << text;
  static std::ostringstream sink;
  sink.str("");
  std::streambuf* out = std::cout.rdbuf(sink.rdbuf());
  std::streambuf* err = std::cerr.rdbuf(sink.rdbuf());
  train::TrainingConfig config;
  int code = -1;
  bool ok = cli::parse_train_args({"--config", path}, &config, &code);
  std::cout.rdbuf(out);
  std::cerr.rdbuf(err);
  FUZZ_CHECK(ok ? code == 0 : (code == 0 || code == 2));
  if (!ok) return 0;
  // What validation promises the trainer: finite numbers (the loss scales matter with fp16
  // only; a negative warm-up fraction means none), positive shapes.
  for (double v :
       {(double)config.lr, (double)config.min_lr, (double)config.hidden_dropout,
        (double)config.attention_dropout, config.peak_tflops, (double)config.model.init_method_std,
        (double)config.model.layernorm_epsilon, (double)config.adam.beta1,
        (double)config.adam.beta2, (double)config.adam.eps, (double)config.adam.weight_decay,
        (double)config.adam.clip_grad, config.fp16 ? (double)config.loss_scale : 0.0,
        config.fp16 ? (double)config.initial_loss_scale : 0.0,
        config.lr_warmup_fraction >= 0 ? config.lr_warmup_fraction : 0.0})
    FUZZ_CHECK(std::isfinite(v));
  FUZZ_CHECK(config.model.num_layers > 0 && config.model.hidden_size > 0);
  FUZZ_CHECK(config.micro_batch_size > 0 && config.effective_global_batch() > 0);
  return 0;
}
