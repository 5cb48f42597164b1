#pragma once
// The JSON answers of both APIs, from the Generator's results. Pure functions (tokenizer for
// the per-token strings), tested without a model.
#include <cstdint>
#include <string>
#include <vector>

#include "generation/generator.h"
#include "tokenizer/tokenizer.h"

namespace trident::serve {

// Megatron's answer: "text" (prompt + generation, as Megatron returns it), "segments" (every
// token of prompt and generation detokenized on its own), "logprobs" (of every token after the
// first: prompt then generation; null unless asked for) and "tokens" (the ids).
std::string megatron_response(const std::vector<generation::GenerationResult>& results,
                              const tokenizer::Tokenizer& tok, bool logprobs);

// What every completion object and chunk carries.
struct CompletionMeta {
  std::string id;  // "cmpl-..."
  std::int64_t created = 0;
  std::string model;
  bool logprobs = false;
};

// OpenAI's finish_reason for the Generator's ("eod" and stop strings are both "stop").
std::string openai_finish_reason(const std::string& generator_reason);

// The whole `text_completion` object: choices in sequence order, usage counts (prompt tokens
// counted once per prompt, as OpenAI does; `n` = sequences per prompt).
std::string completion_response(const CompletionMeta& meta,
                                const std::vector<generation::GenerationResult>& results,
                                const tokenizer::Tokenizer& tok, int n);

// Where a streamed choice stands: characters before its next token (for text_offset).
struct StreamCursor {
  std::int64_t chars = 0;  // the prompt's characters, then each generated token's
};

// One server-sent event of a stream ("data: {...}\n\n") for one token event of choice `index`.
std::string completion_chunk(const CompletionMeta& meta, int index,
                             const generation::TokenEvent& event, const tokenizer::Tokenizer& tok,
                             StreamCursor* cursor);
inline const char* kStreamDone = "data: [DONE]\n\n";

// Characters (code points) that start in these UTF-8 bytes: a token that ends inside a
// character counts it, the token that completes it does not.
std::int64_t chars_started(const std::string& bytes);

// `GET /v1/models`.
std::string models_response(const std::string& model, std::int64_t created);

}  // namespace trident::serve
