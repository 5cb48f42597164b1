#pragma once
// `trident train`'s flags and TOML config (--config), parsed and validated without running
// anything: apart from the files the flags name (--config, --load-hf's config.json, the
// tokenizer's), it touches nothing.
#include <string>
#include <vector>

#include "config/training_config.h"

namespace trident::cli {

// Parses `trident train` arguments (argv after the subcommand) into a config. On a parse
// error or a failed validation it prints every problem and returns a non-zero code in
// *exit_code; on --help it prints usage and sets *exit_code to 0.
bool parse_train_args(const std::vector<std::string>& args, TrainingConfig* config, int* exit_code);

}  // namespace trident::cli
