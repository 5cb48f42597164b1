#pragma once
// `trident train`'s flags and TOML config (--config), parsed and validated without running
// anything: apart from the files the flags name (--config, --load-hf's config.json, the
// tokenizer's), it touches nothing.
#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <vector>

#include "train/training_config.h"

namespace trident::cli {

// The model-shape flags (--num-layers, --hidden-size, ..., --model-preset), shared by
// `trident train` and `trident plan`; `given` tells which the command line set.
struct ModelFlags {
  std::map<std::string, CLI::Option*> given;
  bool was_given(const std::string& flag) const {
    auto it = given.find(flag);
    return it != given.end() && it->second->count() > 0;
  }
};
ModelFlags add_model_flags(CLI::App& app, ModelConfig& m, std::string& preset);
// The Qwen family's flags (--add-qkv-bias, --qk-layernorm, --kv-channels), into `f`.
void add_qwen_model_flags(CLI::App& app, ModelConfig& m, ModelFlags& f);
// --model-preset fills the shape; the flags given explicitly keep their values.
void apply_model_preset(const std::string& preset, const ModelFlags& flags, ModelConfig& model);

// Parses `trident train` arguments (argv after the subcommand) into a config. On a parse
// error or a failed validation it prints every problem and returns a non-zero code in
// *exit_code; on --help it prints usage and sets *exit_code to 0.
bool parse_train_args(const std::vector<std::string>& args, train::TrainingConfig* config,
                      int* exit_code);

}  // namespace trident::cli
