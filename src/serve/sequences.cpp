#include "serve/sequences.h"

#include <algorithm>
#include <string>

namespace trident::serve {

namespace {

// prompt + tokens_to_generate must fit the KV-cache slot; the message names the prompt, both
// counts and the limit (and the flag that sets it).
ApiError check_context(const std::string& prompt_field, const char* count_field, size_t prompt,
                       std::int64_t count, const ModelLimits& limits) {
  const std::int64_t room = (std::int64_t)limits.max_sequence - (std::int64_t)prompt;
  if (count <= room) return {};
  ApiError e = bad_request(
      count_field, prompt_field + " is " + std::to_string(prompt) + " tokens; with " + count_field +
                       " = " + std::to_string(count) + " that exceeds the context of " +
                       std::to_string(limits.max_sequence) + " tokens (--max-sequence-length)");
  e.code = "context_length_exceeded";
  return e;
}

ApiError prompt_too_long(const std::string& field, const std::string& what, long limit,
                         const char* flag) {
  ApiError e = bad_request(field, field + " is " + what + "; the server takes at most " +
                                      std::to_string(limit) + " (" + flag + ")");
  e.code = "prompt_too_long";
  return e;
}

// The prompt's tokens (after BOS when asked); its bytes are counted first, so an over-long
// prompt is refused without tokenizing it.
ApiError tokenize(const std::string& text, bool bos, const tokenizer::Tokenizer& tok,
                  const ModelLimits& limits, const std::string& field, std::vector<int>* ids) {
  if ((long)text.size() > limits.max_prompt_chars)
    return prompt_too_long(field, std::to_string(text.size()) + " bytes", limits.max_prompt_chars,
                           "--max-prompt-chars");
  ids->clear();
  if (bos) ids->push_back(tok.eod());
  tok.encode(text, ids);
  return {};
}

// The prompt within --max-prompt-tokens, and prompt + new tokens within the context.
ApiError check_lengths(const std::string& field, const char* count_field, size_t prompt,
                       std::int64_t count, const ModelLimits& limits) {
  ApiError e = check_context(field, count_field, prompt, count, limits);
  if (e.ok() && (long)prompt > limits.max_prompt_tokens)
    e = prompt_too_long(field, std::to_string(prompt) + " tokens", limits.max_prompt_tokens,
                        "--max-prompt-tokens");
  return e;
}

generation::SamplingParams megatron_sampling(const MegatronRequest& r, std::uint64_t seed) {
  generation::SamplingParams s;
  s.greedy = r.top_k == 1;  // Megatron's greedy: top_k = 1
  s.temperature = (float)r.temperature;
  s.top_k = (int)r.top_k;
  s.top_p = r.top_p > 0 ? (float)r.top_p : 1.f;  // Megatron's 0 means "no top-p"
  s.seed = seed;
  return s;
}

generation::SamplingParams completion_sampling(const CompletionRequest& r, std::uint64_t seed) {
  generation::SamplingParams s;
  s.greedy = r.temperature == 0 || r.top_p == 0;  // both keep only the most likely token
  s.temperature = s.greedy ? 1.f : (float)r.temperature;
  s.top_p = s.greedy ? 1.f : (float)r.top_p;
  s.seed = seed;
  return s;
}

}  // namespace

std::uint64_t sequence_seed(std::uint64_t base, std::uint64_t index) {
  if (index == 0) return base;
  std::uint64_t z = base + index * 0x9E3779B97F4A7C15ull;  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

ApiError megatron_sequences(const MegatronRequest& r, const tokenizer::Tokenizer& tok,
                            const ModelLimits& limits, std::uint64_t fresh_seed,
                            std::vector<generation::GenerationRequest>* out) {
  const std::uint64_t base = r.random_seed >= 0 ? (std::uint64_t)r.random_seed : fresh_seed;
  out->clear();
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    generation::GenerationRequest g;
    std::string field = "prompts[" + std::to_string(i) + "]";
    ApiError e = tokenize(r.prompts[i], r.add_BOS, tok, limits, field, &g.prompt);
    if (e.ok())
      e = check_lengths(field, "tokens_to_generate", g.prompt.size(), r.tokens_to_generate, limits);
    if (!e.ok()) return e;
    g.tokens_to_generate = (int)r.tokens_to_generate;
    g.sampling = megatron_sampling(r, sequence_seed(base, i));
    g.logprobs = r.logprobs;
    g.stop_on_eol = r.stop_on_eol;
    out->push_back(std::move(g));
  }
  return {};
}

ApiError completion_sequences(const CompletionRequest& r, const tokenizer::Tokenizer& tok,
                              const ModelLimits& limits, std::uint64_t fresh_seed,
                              std::vector<generation::GenerationRequest>* out) {
  const std::uint64_t base = r.seed ? *r.seed : fresh_seed;
  out->clear();
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    generation::GenerationRequest g;
    std::string field = r.prompts.size() > 1 ? "prompt[" + std::to_string(i) + "]" : "prompt";
    // OpenAI's models start an empty prompt from <|endoftext|>; so does trident.
    ApiError e = tokenize(r.prompts[i], r.prompts[i].empty(), tok, limits, field, &g.prompt);
    if (e.ok()) e = check_lengths(field, "max_tokens", g.prompt.size(), r.max_tokens, limits);
    if (!e.ok()) return e;
    g.tokens_to_generate = (int)r.max_tokens;
    g.logprobs = r.logprobs.has_value();
    g.top_logprobs = (int)r.logprobs.value_or(0);
    g.stop = r.stop;
    for (std::int64_t j = 0; j < r.n; ++j) {
      g.sampling = completion_sampling(r, sequence_seed(base, out->size()));
      out->push_back(g);
    }
  }
  return {};
}

ApiError chat_sequence(const ChatRequest& r, const std::string& text,
                       const tokenizer::Tokenizer& tok, const ModelLimits& limits,
                       std::uint64_t fresh_seed, generation::GenerationRequest* out) {
  generation::GenerationRequest g;
  // A template that renders nothing still needs a token to start from, as an empty prompt.
  ApiError e = tokenize(text, text.empty(), tok, limits, "messages", &g.prompt);
  if (!e.ok()) return e;
  const std::int64_t room = (std::int64_t)limits.max_sequence - (std::int64_t)g.prompt.size();
  // Without a length, the reply may fill the context; it needs room for one token at least.
  const std::int64_t count = r.max_tokens ? *r.max_tokens : std::max<std::int64_t>(room, 1);
  const std::string count_field = r.max_tokens ? r.max_tokens_field : "max_completion_tokens";
  e = check_lengths("messages", count_field.c_str(), g.prompt.size(), count, limits);
  if (!e.ok()) return e;
  g.tokens_to_generate = (int)count;
  g.logprobs = r.top_logprobs.has_value();
  g.top_logprobs = (int)r.top_logprobs.value_or(0);
  g.stop = r.options.stop;
  g.sampling = completion_sampling(r.options, r.options.seed ? *r.options.seed : fresh_seed);
  *out = std::move(g);
  return {};
}

}  // namespace trident::serve
