#pragma once
#include <string>
#include <vector>

namespace trident::cli {

// trident eval: zero/few-shot tasks scored as lm-evaluation-harness scores them.
int eval_main(const std::vector<std::string>& args);

}  // namespace trident::cli
