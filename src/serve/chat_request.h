#pragma once
// OpenAI's chat completions API: the body of `POST /v1/chat/completions`, parsed and checked
// (a pure function of the body, as completion_request.h). The messages come out in the form
// chat templates read: {"role", "content"} with the content a string.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "serve/completion_request.h"

namespace trident::serve {

struct ChatRequest {
  // [{role, content (, name)}]: roles system, user, assistant ("developer" becomes "system",
  // the role templates know); a content given as text parts is their texts joined by "\n".
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  // model, temperature, top_p, seed, stop, stream (read_shared_fields); its prompts, n,
  // max_tokens and logprobs are unused (chat answers one choice; the fields below).
  CompletionRequest options;
  // max_completion_tokens, or the older max_tokens; none: up to the context.
  std::optional<std::int64_t> max_tokens;
  std::string max_tokens_field;  // the field that gave it, for messages
  // Set when "logprobs": true: top_logprobs, the likeliest tokens listed per step ([0, 20]).
  std::optional<std::int64_t> top_logprobs;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
};

constexpr std::int64_t kMaxChatTopLogprobs = 20;

ApiError parse_chat_request(std::string_view body, ChatRequest* out);

}  // namespace trident::serve
