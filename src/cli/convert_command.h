#pragma once
#include <string>
#include <vector>

namespace trident::cli {

// `trident convert`: a checkpoint to a HuggingFace GPT-2 directory (--load CKPT --save-hf DIR)
// or back (--load-hf DIR --save CKPT; optimizer state starts at zero, iteration 0).
int convert_main(const std::vector<std::string>& args);

}  // namespace trident::cli
