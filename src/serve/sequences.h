#pragma once
// From a parsed request to the Generator's requests: prompts tokenized, each sequence checked
// against the context the KV cache holds (prompt + new tokens), sampling mapped onto
// SamplingParams. Needs the tokenizer and the context length, not the model.
#include <cstdint>
#include <vector>

#include "generation/generator.h"
#include "serve/api_error.h"
#include "serve/chat_request.h"
#include "serve/completion_request.h"
#include "serve/megatron_request.h"
#include "tokenizer/tokenizer.h"

namespace trident::serve {

// What a request is checked against before it reaches the Generator.
struct ModelLimits {
  int max_sequence = 0;  // positions per KV-cache slot: prompt + generated tokens
  // A prompt longer than these is refused: in bytes before it is tokenized (so no prompt
  // costs more than a bounded tokenization), then in tokens.
  long max_prompt_tokens = 1L << 40;
  long max_prompt_chars = 1L << 40;
};

// The seed of sequence `index` of a request seeded `base`: sequence 0 gets base itself (so a
// one-prompt request matches `trident generate --seed base`), the others distinct mixes.
std::uint64_t sequence_seed(std::uint64_t base, std::uint64_t index);

// One sequence per prompt, in prompt order. `fresh_seed` is used when random_seed is -1.
ApiError megatron_sequences(const MegatronRequest& r, const tokenizer::Tokenizer& tok,
                            const ModelLimits& limits, std::uint64_t fresh_seed,
                            std::vector<generation::GenerationRequest>* out);

// n sequences per prompt, prompt-major (choice index = prompt * n + j), as OpenAI numbers them.
ApiError completion_sequences(const CompletionRequest& r, const tokenizer::Tokenizer& tok,
                              const ModelLimits& limits, std::uint64_t fresh_seed,
                              std::vector<generation::GenerationRequest>* out);

// The one sequence of a chat request whose messages the chat template rendered as `text`:
// tokenized as the template wrote it (no BOS added: templates write their own), generating
// max_tokens, or up to the context when the request gave none. Errors name "messages".
ApiError chat_sequence(const ChatRequest& r, const std::string& text,
                       const tokenizer::Tokenizer& tok, const ModelLimits& limits,
                       std::uint64_t fresh_seed, generation::GenerationRequest* out);

}  // namespace trident::serve
