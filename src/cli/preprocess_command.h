#pragma once
#include <string>
#include <vector>

namespace trident::cli {

// `trident preprocess`: Megatron's tools/preprocess_data.py flags, JSONL -> .bin/.idx.
int preprocess_main(const std::vector<std::string>& args);

}  // namespace trident::cli
