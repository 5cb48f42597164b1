#pragma once
// The JSON answers of OpenAI's chat completions API from the Generator's result: the whole
// "chat.completion" object, and the "chat.completion.chunk" events of a stream. Pure
// functions (the tokenizer for each token's text), as responses.h.
#include <cstdint>
#include <string>

#include "generation/generator.h"
#include "serve/responses.h"
#include "tokenizer/tokenizer.h"

namespace trident::serve {

// One choice: message {role "assistant", content}, finish_reason "stop" or "length",
// logprobs {content: [{token, logprob, bytes, top_logprobs}]} (null unless asked), and usage.
std::string chat_response(const CompletionMeta& meta, const generation::GenerationResult& r,
                          const tokenizer::Tokenizer& tok);

// Where a stream stands: whether its first chunk (the role) went out, the tokens so far.
struct ChatStream {
  bool include_usage = false;  // every chunk says "usage": null, a last one has the counts
  bool role_sent = false;
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
};

// The events for one token event: {delta: {role: "assistant", content: ""}} before the first,
// {delta: {content}} (with its logprobs) when it brings a token or text, and
// {delta: {}, finish_reason} when it ends the reply.
std::string chat_chunks(const CompletionMeta& meta, const generation::TokenEvent& event,
                        const tokenizer::Tokenizer& tok, ChatStream* stream);

// The last event of a stream that asked for usage: no choices, the counts.
std::string chat_usage_chunk(const CompletionMeta& meta, const ChatStream& stream);

}  // namespace trident::serve
