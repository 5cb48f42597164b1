#pragma once
// Choosing the next token from full-vocabulary logits: greedy, or temperature / top-k / top-p
// sampling. Draws are counter-based (seed, step), so a request's tokens do not depend on
// which other requests share its batch, nor on the layout the model runs under.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trident::generation {

struct SamplingParams {
  bool greedy = false;      // argmax (also when temperature == 0 or top_k == 1)
  float temperature = 1.f;  // > 0, or 0 for greedy
  int top_k = 0;            // keep the k most likely tokens; 0: all
  float top_p = 1.f;        // keep the smallest set whose probability reaches top_p; 1: all
  std::uint64_t seed = 0;
  bool is_greedy() const { return greedy || temperature == 0.f || top_k == 1; }
};

// Empty when valid, else the rule broken (e.g. "top_p must be in (0, 1]").
std::string validate(const SamplingParams& p);

struct SampledToken {
  int id;
  float logprob;  // log-softmax of the raw (untempered, untruncated) logits at id, or NaN
};

// logits: [vocab]; `step` names the draw (the token's index in its sequence).
// scratch: at least 2 * vocab floats. want_logprob false skips the log-softmax (a pass of
// exp over the vocabulary per token: ~1 ms of a batch-8 decode step).
SampledToken sample_token(const float* logits, int vocab, const SamplingParams& p,
                          std::uint64_t step, float* scratch, bool want_logprob = true);

// log-softmax of logits at `id`.
float token_logprob(const float* logits, int vocab, int id);

// The n most likely tokens and their log-softmax values, most likely first (ties: lower id).
std::vector<std::pair<int, float>> top_logprobs(const float* logits, int vocab, int n);

}  // namespace trident::generation
