// Sampling against the truncated softmax (temperature, top-k, top-p): frequencies by a
// chi-square test, seeded repeats, greedy, and the top log-probabilities.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <vector>

#include "generation/sampling.h"

using namespace trident;

namespace {

// The distribution sampling must follow: softmax(logits / T), the k largest kept, then the
// smallest prefix (by descending probability) reaching top_p, renormalised.
std::vector<double> truncated_softmax(const std::vector<float>& logits, float T, int k, float p) {
  const int n = (int)logits.size();
  std::vector<double> prob(n);
  const double max = *std::max_element(logits.begin(), logits.end());
  for (int i = 0; i < n; ++i) prob[i] = std::exp((logits[i] - max) / T);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return prob[a] > prob[b]; });
  if (k > 0)
    for (int i = k; i < n; ++i) prob[order[i]] = 0;
  double sum = std::accumulate(prob.begin(), prob.end(), 0.0);
  for (double& x : prob) x /= sum;
  double mass = 0;
  int keep = 0;
  while (keep < n && mass < p) mass += prob[order[keep++]];
  for (int i = keep; i < n; ++i) prob[order[i]] = 0;
  sum = std::accumulate(prob.begin(), prob.end(), 0.0);
  for (double& x : prob) x /= sum;
  return prob;
}

}  // namespace

TEST(Sampling, FrequenciesMatchTheTruncatedSoftmax) {
  const std::vector<float> logits = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.7f, 0.9f, 2.2f};
  struct Case {
    float temperature;
    int top_k;
    float top_p;
  };
  // Chi-square critical values at p = 0.001 by degrees of freedom.
  const std::map<int, double> critical = {{1, 10.83}, {2, 13.82}, {3, 16.27}, {4, 18.47},
                                          {5, 20.52}, {6, 22.46}, {7, 24.32}};
  std::vector<float> scratch(2 * logits.size());
  for (Case c : {Case{1.f, 0, 1.f}, Case{0.7f, 4, 1.f}, Case{1.3f, 0, 0.8f}, Case{1.f, 5, 0.7f}}) {
    generation::SamplingParams p;
    p.temperature = c.temperature, p.top_k = c.top_k, p.top_p = c.top_p, p.seed = 99;
    const std::vector<double> want = truncated_softmax(logits, c.temperature, c.top_k, c.top_p);
    const int draws = 40000;
    std::vector<int> count(logits.size(), 0);
    for (int s = 0; s < draws; ++s)
      ++count[generation::sample_token(logits.data(), (int)logits.size(), p, s, scratch.data()).id];
    double chi2 = 0;
    int df = -1;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (want[i] == 0) {
        EXPECT_EQ(count[i], 0) << "token " << i << " lies outside the truncation";
        continue;
      }
      const double expected = want[i] * draws;
      chi2 += (count[i] - expected) * (count[i] - expected) / expected;
      ++df;
    }
    EXPECT_LT(chi2, critical.at(df))
        << "T " << c.temperature << " k " << c.top_k << " p " << c.top_p;
  }
}

TEST(Sampling, SeededDrawsRepeatAndGreedyIsArgmax) {
  const std::vector<float> logits = {0.1f, 0.4f, 0.35f, 0.2f};
  std::vector<float> scratch(8);
  generation::SamplingParams p;
  p.seed = 5;
  std::vector<int> a, b, c;
  for (int s = 0; s < 64; ++s) {
    a.push_back(generation::sample_token(logits.data(), 4, p, s, scratch.data()).id);
    b.push_back(generation::sample_token(logits.data(), 4, p, s, scratch.data()).id);
  }
  p.seed = 6;
  for (int s = 0; s < 64; ++s)
    c.push_back(generation::sample_token(logits.data(), 4, p, s, scratch.data()).id);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (generation::SamplingParams g : {generation::SamplingParams{true}, [] {
                                         generation::SamplingParams q;
                                         q.top_k = 1;
                                         return q;
                                       }()}) {
    const generation::SampledToken t =
        generation::sample_token(logits.data(), 4, g, 3, scratch.data());
    EXPECT_EQ(t.id, 1);
    EXPECT_NEAR(t.logprob, generation::token_logprob(logits.data(), 4, 1), 1e-6);
  }
  EXPECT_NE(generation::validate(generation::SamplingParams{false, 1.f, 0, 0.f}), "");
  EXPECT_NE(generation::validate(generation::SamplingParams{false, -1.f}), "");
}

TEST(Sampling, TopLogprobsAreTheLikeliestInOrder) {
  const std::vector<float> logits = {0.1f, 2.0f, -1.f, 2.0f, 0.7f};
  auto top = generation::top_logprobs(logits.data(), 5, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, 1);  // ties: the lower id first
  EXPECT_EQ(top[1].first, 3);
  EXPECT_EQ(top[2].first, 4);
  for (const auto& [id, lp] : top)
    EXPECT_NEAR(lp, generation::token_logprob(logits.data(), 5, id), 1e-6);
}
