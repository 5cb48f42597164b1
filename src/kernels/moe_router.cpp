#include "kernels/moe_router.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace trident::kernels {

namespace {

// The k largest of row[0..E), highest first, ties to the lower index.
void top_k(const float* row, int experts, int k, int* out) {
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int e = 0; e < experts; ++e) {
      if (std::find(out, out + j, e) != out + j) continue;
      if (best < 0 || row[e] > row[best]) best = e;
    }
    out[j] = best;
  }
}

// probs = softmax(row) over E; returns the log-sum-exp.
float softmax_row(const float* row, int experts, float* probs) {
  const float max = *std::max_element(row, row + experts);
  double sum = 0;
  for (int e = 0; e < experts; ++e) sum += probs[e] = std::exp(row[e] - max);
  const float inv = (float)(1.0 / sum);
  for (int e = 0; e < experts; ++e) probs[e] *= inv;
  return max + (float)std::log(sum);
}

float weight_scale(const RouterShape& s) {
  return s.scaling_factor > 0.f ? s.scaling_factor : 1.f;
}

}  // namespace

void moe_router_forward(const RouterShape& s, const float* logits, float* probs, float* lse,
                        int* idx, float* weights) {
  const int E = s.experts, k = s.topk;
  const float scale = weight_scale(s);
#pragma omp parallel for schedule(static)
  for (int t = 0; t < s.tokens; ++t) {
    const float* row = logits + (long)t * E;
    float* p = probs + (long)t * E;
    int* chosen = idx + (long)t * k;
    float* w = weights + (long)t * k;
    lse[t] = softmax_row(row, E, p);
    top_k(row, E, k, chosen);  // the softmax keeps the order: the same experts either way
    if (s.pre_softmax) {
      for (int j = 0; j < k; ++j) w[j] = p[chosen[j]] * scale;
      continue;
    }
    // The softmax over the k chosen logits, from the largest (chosen[0]).
    double sum = 0;
    for (int j = 0; j < k; ++j) sum += w[j] = std::exp(row[chosen[j]] - row[chosen[0]]);
    for (int j = 0; j < k; ++j) w[j] = (float)(w[j] / sum) * scale;
  }
}

void moe_router_backward(const RouterShape& s, const float* probs, const int* idx,
                         const float* weights, const float* d_weights, float* d_logits) {
  const int E = s.experts, k = s.topk;
  const float scale = weight_scale(s);
#pragma omp parallel for schedule(static)
  for (int t = 0; t < s.tokens; ++t) {
    const int* chosen = idx + (long)t * k;
    const float* w = weights + (long)t * k;
    const float* g = d_weights + (long)t * k;
    const float* p = probs + (long)t * E;
    float* d = d_logits + (long)t * E;
    std::fill(d, d + E, 0.f);
    if (s.pre_softmax) {
      // weights_j = scale * p[chosen_j]: dL/dp is scale * g on the chosen experts, then the
      // softmax Jacobian over E: d_e = p_e (dp_e - sum_i p_i dp_i).
      double dot = 0;
      for (int j = 0; j < k; ++j) dot += (double)p[chosen[j]] * scale * g[j];
      for (int e = 0; e < E; ++e) d[e] = (float)(-p[e] * dot);
      for (int j = 0; j < k; ++j) d[chosen[j]] += p[chosen[j]] * scale * g[j];
      continue;
    }
    // weights_j = scale * q_j with q the softmax over the k: d_j = q_j (g'_j - sum_i q_i g'_i)
    // with g' = scale * g, i.e. weights_j (g_j - sum_i q_i g_i).
    double dot = 0;
    for (int j = 0; j < k; ++j) dot += (double)w[j] / scale * g[j];
    for (int j = 0; j < k; ++j) d[chosen[j]] = (float)(w[j] * (g[j] - dot));
  }
}

void count_tokens_per_expert(const int* idx, int tokens, int topk, int experts, float* counts) {
  std::fill(counts, counts + experts, 0.f);
  for (long i = 0; i < (long)tokens * topk; ++i) counts[idx[i]] += 1.f;
}

double aux_loss_scale(double coeff, int experts, int topk, double total_tokens) {
  return coeff * experts / (topk * total_tokens * total_tokens);
}

double moe_aux_loss(const float* probs, const float* counts, int tokens, int experts,
                    double scale) {
  // One thread, in row order: the logged value is the same bits whatever the thread count
  // (an OpenMP reduction combines its partial sums in arrival order).
  double sum = 0;
  for (int t = 0; t < tokens; ++t)
    for (int e = 0; e < experts; ++e) sum += (double)probs[(long)t * experts + e] * counts[e];
  return scale * sum;
}

void moe_aux_loss_backward(const float* probs, const float* counts, int tokens, int experts,
                           double scale_times_grad, float* d_logits) {
  // dL/dp[x, e] = c counts[e], the same for every row; through the softmax over E:
  // d_e = p_e (dp_e - sum_i p_i dp_i).
#pragma omp parallel for schedule(static)
  for (int t = 0; t < tokens; ++t) {
    const float* p = probs + (long)t * experts;
    double dot = 0;
    for (int e = 0; e < experts; ++e) dot += (double)p[e] * counts[e];
    for (int e = 0; e < experts; ++e)
      d_logits[(long)t * experts + e] += (float)(scale_times_grad * p[e] * (counts[e] - dot));
  }
}

double moe_z_loss(const float* lse, int tokens, double scale) {
  double sum = 0;
  for (int t = 0; t < tokens; ++t) sum += (double)lse[t] * lse[t];
  return scale * sum;
}

void moe_z_loss_backward(const float* probs, const float* lse, int tokens, int experts,
                         double scale_times_grad, float* d_logits) {
#pragma omp parallel for schedule(static)
  for (int t = 0; t < tokens; ++t) {
    const double c = scale_times_grad * 2.0 * lse[t];
    for (int e = 0; e < experts; ++e)
      d_logits[(long)t * experts + e] += (float)(c * probs[(long)t * experts + e]);
  }
}

int moe_expert_capacity(int tokens, int topk, int experts, double capacity_factor) {
  return (int)std::ceil((double)tokens * topk / experts * capacity_factor);
}

void moe_capacity_keep(const int* idx, const float* weights, int tokens, int topk, int experts,
                       int capacity, DropPolicy policy, unsigned char* keep) {
  // Each expert's (token, slot) pairs, in token order.
  std::vector<std::vector<long>> chosen(experts);
  for (long i = 0; i < (long)tokens * topk; ++i) chosen[idx[i]].push_back(i);
  std::fill(keep, keep + (long)tokens * topk, (unsigned char)0);
  for (std::vector<long>& pairs : chosen) {
    if (policy == DropPolicy::kProbs)  // stable: equal weights keep their token order
      std::stable_sort(pairs.begin(), pairs.end(),
                       [&](long a, long b) { return weights[a] > weights[b]; });
    const long kept = std::min<long>(std::max(capacity, 0), (long)pairs.size());
    for (long n = 0; n < kept; ++n) keep[pairs[n]] = 1;
  }
}

}  // namespace trident::kernels
