// The MoE router against a double-precision reference written from Megatron-Core's
// definitions (moe_utils.topk_routing_with_score_function): softmax over E and top-k with
// the weights kept (pre-softmax), top-k of the logits then a softmax over the k (the
// default), the top-k scaling factor; its backward against central finite differences of
// that reference; the load-balancing loss against its f_i * P_i form
// (switch_load_balancing_loss_func: coeff * E * sum_i f_i P_i, f_i = n_i / (T k),
// P_i = sum_x p(x, i) / T) and the z-loss against coeff / t * mean(lse^2), both with
// finite-difference gradients; the capacity and the choices each drop policy keeps against
// a count of the choices ahead of each. Logits are drawn with gaps of at least 0.15 between a row's
// values, so no top-k choice is a tie and none flips under the differences' steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/moe_router.h"
#include "test_util.h"

namespace trident {
namespace {

using testing::numeric_gradient;
using testing::random_vector;
using testing::relative_error;
using testing::to_double;

// max |a - b| / max |b|: the router losses' gradients are far below 1, where
// testing::relative_error's floor of 1 would hide their errors.
double scaled_error(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    scale = std::max(scale, std::abs(b[i]));
    worst = std::max(worst, std::abs(a[i] - b[i]));
  }
  return worst / scale;
}

// Each row a shuffle of 0.25 * e (e < E) plus noise under 0.05, centred.
std::vector<float> tie_free_logits(int tokens, int experts, std::uint64_t seed) {
  std::vector<float> logits((size_t)tokens * experts);
  const auto noise = random_vector((long)tokens * experts, seed, 0.01f);
  for (int t = 0; t < tokens; ++t) {
    std::vector<int> order(experts);
    std::iota(order.begin(), order.end(), 0);
    for (int i = experts - 1; i > 0; --i) {  // Fisher-Yates from the seeded normals
      const double u = std::abs(normal_at(seed + 1, t, i));
      std::swap(order[i], order[(int)(u * 1000) % (i + 1)]);
    }
    for (int e = 0; e < experts; ++e) {
      const float jitter = std::clamp(noise[(size_t)t * experts + e], -0.04f, 0.04f);
      logits[(size_t)t * experts + e] = 0.25f * order[e] - 0.125f * experts + jitter;
    }
  }
  return logits;
}

struct RefRouting {
  std::vector<double> probs, lse, weights;
  std::vector<int> idx;
};

// The reference routing in double, from the published definitions.
RefRouting route_ref(const std::vector<double>& logits, const kernels::RouterShape& s) {
  const int E = s.experts, k = s.topk;
  const double scale = s.scaling_factor > 0 ? s.scaling_factor : 1.0;
  RefRouting r;
  for (int t = 0; t < s.tokens; ++t) {
    const double* row = &logits[(size_t)t * E];
    double z = 0;
    for (int e = 0; e < E; ++e) z += std::exp(row[e]);
    r.lse.push_back(std::log(z));
    for (int e = 0; e < E; ++e) r.probs.push_back(std::exp(row[e]) / z);
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
    double chosen_sum = 0;
    for (int j = 0; j < k; ++j) chosen_sum += std::exp(row[order[j]]);
    for (int j = 0; j < k; ++j) {
      r.idx.push_back(order[j]);
      const double e = std::exp(row[order[j]]);
      r.weights.push_back(scale * (s.pre_softmax ? e / z : e / chosen_sum));
    }
  }
  return r;
}

struct Routed {
  std::vector<float> probs, lse, weights;
  std::vector<int> idx;
};

Routed route(const kernels::RouterShape& s, const std::vector<float>& logits) {
  Routed r;
  r.probs.resize(logits.size()), r.lse.resize(s.tokens);
  r.idx.resize((size_t)s.tokens * s.topk), r.weights.resize(r.idx.size());
  kernels::moe_router_forward(s, logits.data(), r.probs.data(), r.lse.data(), r.idx.data(),
                              r.weights.data());
  return r;
}

void expect_router_matches_reference(const kernels::RouterShape& s, std::uint64_t seed) {
  const auto logits = tie_free_logits(s.tokens, s.experts, seed);
  const Routed r = route(s, logits);
  const RefRouting ref = route_ref(to_double(logits), s);
  EXPECT_EQ(r.idx, ref.idx);
  EXPECT_LT(relative_error(r.weights, ref.weights), 1e-6);
  EXPECT_LT(relative_error(r.probs, ref.probs), 1e-6);
  EXPECT_LT(relative_error(r.lse, ref.lse), 1e-6);
  // Backward: d(sum g * weights)/d(logits) against finite differences of the reference.
  const auto g = random_vector((long)s.tokens * s.topk, seed + 2);
  std::vector<float> d_logits(logits.size(), 7.f);  // overwritten
  kernels::moe_router_backward(s, r.probs.data(), r.idx.data(), r.weights.data(), g.data(),
                               d_logits.data());
  const auto num = numeric_gradient(
      [&](const std::vector<double>& v) { return testing::weighted(route_ref(v, s).weights, g); },
      to_double(logits));
  EXPECT_LT(scaled_error(d_logits, num), 1e-5);
}

TEST(MoeRouter, TopKThenSoftmaxOverKMatchesReference) {
  expect_router_matches_reference({9, 6, 2, false, 0.f}, 31);
  expect_router_matches_reference({5, 8, 3, false, 2.5f}, 32);
  expect_router_matches_reference({4, 4, 4, false, 0.f}, 33);  // k = E: a plain softmax
}

TEST(MoeRouter, SoftmaxThenTopKMatchesReference) {
  expect_router_matches_reference({9, 6, 2, true, 0.f}, 41);
  expect_router_matches_reference({5, 8, 1, true, 0.f}, 42);  // top-1 needs pre-softmax
  expect_router_matches_reference({6, 7, 3, true, 1.5f}, 43);
}

TEST(MoeRouter, DefaultWeightsAreTheRenormalisedSoftmax) {
  // Megatron's default equals Mixtral's softmax over E, top-k, divided by the k's sum.
  const kernels::RouterShape s{7, 8, 2, false, 0.f};
  const auto logits = tie_free_logits(s.tokens, s.experts, 51);
  const Routed r = route(s, logits);
  for (int t = 0; t < s.tokens; ++t) {
    const float* p = &r.probs[(size_t)t * s.experts];
    const double sum = (double)p[r.idx[2 * t]] + p[r.idx[2 * t + 1]];
    for (int j = 0; j < 2; ++j) EXPECT_NEAR(r.weights[2 * t + j], p[r.idx[2 * t + j]] / sum, 1e-6);
  }
}

TEST(MoeRouter, TiesGoToTheLowerExpert) {
  const kernels::RouterShape s{1, 4, 2, false, 0.f};
  const Routed r = route(s, {0.5f, 1.f, 0.5f, 1.f});
  EXPECT_EQ(r.idx, (std::vector<int>{1, 3}));
}

TEST(MoeRouter, CapacityKeepsTheHighestWeightsOrTheFirstTokens) {
  // Megatron's get_capacity: ceil(tokens * k / E * factor).
  EXPECT_EQ(kernels::moe_expert_capacity(10, 2, 4, 1.0), 5);
  EXPECT_EQ(kernels::moe_expert_capacity(10, 2, 4, 0.5), 3);   // ceil(2.5)
  EXPECT_EQ(kernels::moe_expert_capacity(10, 2, 4, 1.25), 7);  // ceil(6.25)
  const kernels::RouterShape s{12, 4, 2, false, 0.f};
  const auto logits = tie_free_logits(s.tokens, s.experts, 141);
  Routed r = route(s, logits);
  r.weights[5] = r.weights[3];  // one tie of weights, if both go to one expert
  const int capacity = kernels::moe_expert_capacity(s.tokens, s.topk, s.experts, 0.5);
  for (auto policy : {kernels::DropPolicy::kProbs, kernels::DropPolicy::kPosition}) {
    std::vector<unsigned char> keep(r.idx.size(), 7);
    kernels::moe_capacity_keep(r.idx.data(), r.weights.data(), s.tokens, s.topk, s.experts,
                               capacity, policy, keep.data());
    // A choice is kept iff fewer than `capacity` choices of its expert come before it: a
    // higher weight (or the same weight and an earlier token) under probs, an earlier
    // token under position.
    for (size_t i = 0; i < r.idx.size(); ++i) {
      int ahead = 0;
      for (size_t o = 0; o < r.idx.size(); ++o) {
        if (o == i || r.idx[o] != r.idx[i]) continue;
        const bool earlier = o < i;
        ahead += policy == kernels::DropPolicy::kPosition
                     ? earlier
                     : r.weights[o] > r.weights[i] || (r.weights[o] == r.weights[i] && earlier);
      }
      EXPECT_EQ(keep[i], ahead < capacity ? 1 : 0) << "choice " << i;
    }
  }
}

TEST(MoeRouter, AuxLossAndGradientMatchSwitchFormula) {
  const int tokens = 8, E = 6, k = 2, t = 2;  // 8 rows on this rank of a 2-way tensor group
  const double coeff = 1.0, total = (double)tokens * t;
  const kernels::RouterShape s{tokens, E, k, false, 0.f};
  const auto logits = tie_free_logits(tokens, E, 61);
  const Routed r = route(s, logits);
  // The micro-batch's counts: this rank's plus the other rank's (made up: 2 per expert).
  std::vector<float> counts(E);
  kernels::count_tokens_per_expert(r.idx.data(), tokens, k, E, counts.data());
  const RefRouting ref = route_ref(to_double(logits), s);
  std::vector<double> n(E, 2.0);
  for (int i : ref.idx) n[i] += 1;
  for (float& c : counts) c += 2.f;
  for (int e = 0; e < E; ++e) ASSERT_EQ(counts[e], n[e]);
  auto aux_ref = [&](const std::vector<double>& v) {
    const RefRouting q = route_ref(v, s);
    double sum = 0;
    for (int e = 0; e < E; ++e) {
      double p_sum = 0;
      for (int x = 0; x < tokens; ++x) p_sum += q.probs[(size_t)x * E + e];
      sum += n[e] / (total * k) * (p_sum / total);  // f_i * P_i
    }
    return coeff * E * sum;
  };
  const double scale = kernels::aux_loss_scale(coeff, E, k, total);
  const double aux = kernels::moe_aux_loss(r.probs.data(), counts.data(), tokens, E, scale);
  EXPECT_NEAR(aux, aux_ref(to_double(logits)), 1e-6 * aux);
  const double grad = 0.75;  // the loss's seed (loss scale / micro-batches)
  std::vector<float> d_logits(logits.size(), 0.25f);
  kernels::moe_aux_loss_backward(r.probs.data(), counts.data(), tokens, E, scale * grad,
                                 d_logits.data());
  const auto num = numeric_gradient([&](const std::vector<double>& v) { return grad * aux_ref(v); },
                                    to_double(logits));
  for (float& x : d_logits) x -= 0.25f;  // it accumulates
  EXPECT_LT(scaled_error(d_logits, num), 1e-4);
}

TEST(MoeRouter, ZLossAndGradientMatchFormula) {
  const int tokens = 5, E = 7, t = 2;
  const double coeff = 1.0;
  const kernels::RouterShape s{tokens, E, 2, false, 0.f};
  const auto logits = random_vector((long)tokens * E, 71, 3.f);  // z-loss has no top-k
  const Routed r = route(s, logits);
  auto z_ref = [&](const std::vector<double>& v) {
    double sum = 0;
    for (int x = 0; x < tokens; ++x) {
      double z = 0;
      for (int e = 0; e < E; ++e) z += std::exp(v[(size_t)x * E + e]);
      sum += std::log(z) * std::log(z);
    }
    return coeff / t * (sum / tokens);
  };
  const double scale = coeff / (t * tokens);
  const double z = kernels::moe_z_loss(r.lse.data(), tokens, scale);
  EXPECT_NEAR(z, z_ref(to_double(logits)), 1e-6 * z);
  std::vector<float> d_logits(logits.size(), 0.25f);
  kernels::moe_z_loss_backward(r.probs.data(), r.lse.data(), tokens, E, scale * 2.0,
                               d_logits.data());
  const auto num = numeric_gradient([&](const std::vector<double>& v) { return 2.0 * z_ref(v); },
                                    to_double(logits));
  for (float& x : d_logits) x -= 0.25f;  // it accumulates
  EXPECT_LT(scaled_error(d_logits, num), 1e-4);
}

}  // namespace
}  // namespace trident
