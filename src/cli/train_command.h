#pragma once
#include <string>
#include <vector>

#include "cli/train_args.h"

namespace trident::cli {

int train_main(const std::vector<std::string>& args);

}  // namespace trident::cli
