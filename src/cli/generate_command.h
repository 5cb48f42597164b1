#pragma once
#include <string>
#include <vector>

namespace trident::cli {

// trident generate: continuations of prompts from a checkpoint or HF weights (KV cache,
// continuous batching, greedy or sampled), under any tensor x pipeline layout.
int generate_main(const std::vector<std::string>& args);

}  // namespace trident::cli
