#pragma once
// Megatron-LM's text generation API (tools/run_text_generation_server.py): the body of
// `PUT /api`, parsed and checked by the rules of Megatron's MegatronGenerate.put, with the
// same defaults. A pure function of the body, so the fuzz target and unit tests need no model.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "serve/api_error.h"

namespace trident::serve {

struct MegatronRequest {
  std::vector<std::string> prompts;  // 1..128, each non-empty unless add_BOS
  std::int64_t tokens_to_generate = 64;
  bool logprobs = false;          // log-probabilities of every token after the first
  double temperature = 1.0;       // (0, 100]
  std::int64_t top_k = 0;         // [0, 1000]; 0: no top-k; 1: greedy
  double top_p = 0.0;             // [0, 1]; 0: no top-p (Megatron's default)
  bool add_BOS = false;           // prepend <|endoftext|> to every prompt
  bool stop_on_eol = false;       // end a sequence after a token with a newline
  std::int64_t random_seed = -1;  // -1: a fresh seed per request
};

constexpr size_t kMaxMegatronPrompts = 128;  // Megatron's limit

// Fills *out from the body, or returns the first rule broken (status 400).
ApiError parse_megatron_request(std::string_view body, MegatronRequest* out);

}  // namespace trident::serve
