#pragma once
#include <string>
#include <vector>

namespace trident::cli {

// trident serve: an HTTP generation server (Megatron's PUT /api and OpenAI's
// /v1/completions) over one continuously batched model, under any tensor x pipeline layout:
// world rank 0 serves, the other ranks follow its steps.
int serve_main(const std::vector<std::string>& args);

}  // namespace trident::cli
