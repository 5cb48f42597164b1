#include "generation/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/random.h"

namespace trident::generation {

namespace {

const std::uint64_t kSampleStream = hash_string("generation.sample");

int argmax(const float* x, int n) {
  return (int)(std::max_element(x, x + n) - x);
}

// Indices of the `count` largest values of x (ties: lower index first), in that order.
void largest(const float* x, int n, int count, std::vector<int>* idx) {
  idx->resize(n);
  std::iota(idx->begin(), idx->end(), 0);
  auto before = [x](int a, int b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
  std::partial_sort(idx->begin(), idx->begin() + count, idx->end(), before);
  idx->resize(count);
}

// The smallest prefix of `order` (descending probabilities p) whose mass reaches top_p;
// widens the sorted part only as far as needed (a trained model's nucleus is small).
int nucleus_size(const float* p, int n, float top_p, std::vector<int>* order) {
  for (int sorted = std::min(n, 64);; sorted = std::min(n, sorted * 8)) {
    largest(p, n, sorted, order);
    double mass = 0;
    for (int i = 0; i < sorted; ++i)
      if ((mass += p[(*order)[i]]) >= top_p) return i + 1;
    if (sorted == n) return n;
  }
}

}  // namespace

std::string validate(const SamplingParams& p) {
  if (!(p.temperature >= 0.f) || !std::isfinite(p.temperature))
    return "temperature must be a finite number >= 0";
  if (p.top_k < 0) return "top_k must be >= 0";
  if (!(p.top_p > 0.f && p.top_p <= 1.f)) return "top_p must be in (0, 1]";
  return "";
}

float token_logprob(const float* logits, int vocab, int id) {
  const float max = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp((double)logits[i] - max);
  return (float)((double)logits[id] - max - std::log(sum));
}

std::vector<std::pair<int, float>> top_logprobs(const float* logits, int vocab, int n) {
  thread_local std::vector<int> order;
  n = std::clamp(n, 0, vocab);
  largest(logits, vocab, n, &order);
  const float max = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp((double)logits[i] - max);
  const double log_sum = std::log(sum);
  std::vector<std::pair<int, float>> out;
  for (int id : order) out.emplace_back(id, (float)((double)logits[id] - max - log_sum));
  return out;
}

SampledToken sample_token(const float* logits, int vocab, const SamplingParams& p,
                          std::uint64_t step, float* scratch, bool want_logprob) {
  auto with_logprob = [&](int id) -> SampledToken {
    return {id, want_logprob ? token_logprob(logits, vocab, id) : NAN};
  };
  if (p.is_greedy()) return with_logprob(argmax(logits, vocab));
  // Tempered probabilities over the candidates: the top k, or every token.
  thread_local std::vector<int> order;
  const int k = p.top_k > 0 ? std::min(p.top_k, vocab) : vocab;
  float* prob = scratch;
  const float max = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += prob[i] = std::exp((logits[i] - max) / p.temperature);
  if (k < vocab) {
    largest(logits, vocab, k, &order);
    sum = 0;
    std::fill_n(scratch + vocab, vocab, 0.f);
    for (int i : order) sum += scratch[vocab + i] = prob[i];
    std::copy_n(scratch + vocab, vocab, prob);
  }
  for (int i = 0; i < vocab; ++i) prob[i] = (float)(prob[i] / sum);
  // Nucleus: the candidates in descending order until their mass reaches top_p.
  const double u = uniform_at(p.seed, kSampleStream, step);
  int chosen = -1;
  if (p.top_p < 1.f) {
    const int n = nucleus_size(prob, vocab, p.top_p, &order);
    double mass = 0;
    for (int i = 0; i < n; ++i) mass += prob[order[i]];
    double acc = 0;
    for (int i = 0; i < n && chosen < 0; ++i)
      if ((acc += prob[order[i]]) > u * mass) chosen = order[i];
    if (chosen < 0) chosen = order[n - 1];
  } else {
    double acc = 0;
    for (int i = 0; i < vocab && chosen < 0; ++i)
      if (prob[i] > 0.f && (acc += prob[i]) > u) chosen = i;
    if (chosen < 0) chosen = argmax(prob, vocab);  // u at the top edge of rounding
  }
  return with_logprob(chosen);
}

}  // namespace trident::generation
