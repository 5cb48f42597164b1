#include "kernels/cross_entropy.h"

#include <cmath>
#include <limits>

#include "kernels/fast_math.h"

namespace trident::kernels {

void softmax_row_stats(const float* logits, int rows, int cols, int valid_cols, float* row_max,
                       float* row_sumexp) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const float* row = logits + (long)r * cols;
    float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
    for (int c = 0; c < valid_cols; ++c) mx = std::max(mx, row[c]);
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < valid_cols; ++c) sum += fast_exp(row[c] - mx);
    row_max[r] = mx;
    row_sumexp[r] = sum;
  }
}

void rebase_sumexp(const float* local_max, const float* global_max, float* sumexp, int rows) {
  for (int r = 0; r < rows; ++r)
    sumexp[r] = sumexp[r] == 0.f ? 0.f : sumexp[r] * std::exp(local_max[r] - global_max[r]);
}

void gather_target_logit(const float* logits, const int* targets, int rows, int cols,
                         int vocab_start, float* target_logit) {
  for (int r = 0; r < rows; ++r) {
    int local = targets[r] - vocab_start;
    target_logit[r] = (local >= 0 && local < cols) ? logits[(long)r * cols + local] : 0.f;
  }
}

void softmax_cross_entropy_backward_inplace(float* logits, const int* targets, const float* row_max,
                                            const float* row_sumexp, int rows, int cols,
                                            int valid_cols, int vocab_start, float scale) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    float* row = logits + (long)r * cols;
    float mx = row_max[r], inv = scale / row_sumexp[r];
#pragma omp simd
    for (int c = 0; c < valid_cols; ++c) row[c] = fast_exp(row[c] - mx) * inv;
    for (int c = valid_cols; c < cols; ++c) row[c] = 0.f;
    int local = targets[r] - vocab_start;
    if (local >= 0 && local < valid_cols) row[local] -= scale;
  }
}

}  // namespace trident::kernels
