#pragma once
// OpenAI's legacy completions API: the body of `POST /v1/completions`, parsed and checked by
// OpenAI's documented ranges and defaults. A pure function of the body (see megatron_request.h).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/api_error.h"
#include "serve/json_fields.h"

namespace trident::serve {

struct CompletionRequest {
  std::vector<std::string> prompts;  // `prompt`: one string or a list; "" starts from <|endoftext|>
  std::string model;                 // empty: not given
  std::int64_t max_tokens = 16;      // >= 0 (the context bounds it, checked with the model)
  double temperature = 1.0;          // [0, 2]; 0: greedy
  double top_p = 1.0;                // [0, 1]; 0: greedy (only the most likely token)
  std::int64_t n = 1;                // completions per prompt
  std::vector<std::string> stop;     // up to 4 non-empty strings; the text ends before one
  std::optional<std::int64_t> logprobs;  // [0, 5]: chosen tokens' log-probabilities + N likeliest
  std::optional<std::uint64_t> seed;
  bool stream = false;  // server-sent events, one per token, then `data: [DONE]`
};

constexpr size_t kMaxCompletionPrompts = 128;
constexpr size_t kMaxCompletionChoices = 128;  // prompts x n
constexpr size_t kMaxStopStrings = 4;

ApiError parse_completion_request(std::string_view body, CompletionRequest* out);

// The fields OpenAI's chat and legacy completions read alike, into *r: model, temperature,
// top_p, seed, stream, stop; presence_penalty, frequency_penalty and logit_bias accepted only
// at their neutral value, user type-checked and unused.
ApiError read_shared_fields(const Json& j, CompletionRequest* r);

}  // namespace trident::serve
