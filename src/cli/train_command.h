#pragma once
#include <string>
#include <vector>

#include "config/training_config.h"

namespace trident::cli {

// Parses `trident train` arguments (argv after the subcommand) into a config. On a parse
// error or a failed validation it prints every problem and returns a non-zero code in
// *exit_code; on --help it prints usage and sets *exit_code to 0.
bool parse_train_args(const std::vector<std::string>& args, TrainingConfig* config, int* exit_code);

int train_main(const std::vector<std::string>& args);

}  // namespace trident::cli
