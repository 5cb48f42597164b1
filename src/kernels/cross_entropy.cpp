#include "kernels/cross_entropy.h"

#include <cmath>
#include <limits>

#include "kernels/fast_math.h"

namespace trident::kernels {

void gather_target_logit(const float* logits, const int* targets, int rows, int cols,
                         int vocab_start, float* target_logit) {
  for (int r = 0; r < rows; ++r) {
    int local = targets[r] - vocab_start;  // targets[r] < 0: uncounted, no rank holds it
    target_logit[r] =
        (targets[r] >= 0 && local >= 0 && local < cols) ? logits[(long)r * cols + local] : 0.f;
  }
}

void softmax_exp_inplace(float* logits, int rows, int cols, int valid_cols, float* row_max,
                         float* row_sumexp) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    float* row = logits + (long)r * cols;
    float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
    for (int c = 0; c < valid_cols; ++c) mx = std::max(mx, row[c]);
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < valid_cols; ++c) {
      const float e = fast_exp(row[c] - mx);
      row[c] = e;
      sum += e;
    }
    for (int c = valid_cols; c < cols; ++c) row[c] = 0.f;
    row_max[r] = mx;
    row_sumexp[r] = sum;
  }
}

void rebase_sumexp(const float* local_max, const float* global_max, float* sumexp, int rows) {
  for (int r = 0; r < rows; ++r)
    sumexp[r] = sumexp[r] == 0.f ? 0.f : sumexp[r] * std::exp(local_max[r] - global_max[r]);
}

namespace {

template <typename Out>
void softmax_cross_entropy_backward_into(const SoftmaxRows& s, const int* targets, float scale,
                                         Out* grad) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < s.rows; ++r) {
    const float* e = s.exps + (long)r * s.cols;
    Out* g = grad + (long)r * s.cols;
    // A shard without valid columns has local max -inf and all exps 0.
    const float rebase = s.local_max[r] == -std::numeric_limits<float>::infinity()
                             ? 0.f
                             : std::exp(s.local_max[r] - s.global_max[r]);
    const float row_scale = targets[r] < 0 ? 0.f : scale;  // an uncounted target
    const float factor = row_scale * rebase / s.global_sumexp[r];
    const int local = targets[r] - s.vocab_start;
#pragma omp simd
    for (int c = 0; c < s.cols; ++c)
      store_as(g + c, e[c] * factor - (c == local ? row_scale : 0.f));
  }
}

}  // namespace

void softmax_cross_entropy_backward(const SoftmaxRows& s, const int* targets, float scale,
                                    float* grad) {
  softmax_cross_entropy_backward_into(s, targets, scale, grad);
}

void softmax_cross_entropy_backward(const SoftmaxRows& s, const int* targets, float scale,
                                    bf16_t* grad) {
  softmax_cross_entropy_backward_into(s, targets, scale, grad);
}

}  // namespace trident::kernels
