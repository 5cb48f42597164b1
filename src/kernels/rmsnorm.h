#pragma once
// RMSNorm (Zhang & Sennrich 2019), the Llama family's normalization: y = x * rstd * weight
// with rstd = 1 / sqrt(mean(x^2) + eps); no mean subtraction, no bias. Statistics in fp32.
#include <cmath>

#include "kernels/low_precision.h"

namespace trident::kernels {

// One row of `cols` values (a token's hidden state, or one head of it: head_rmsnorm.h):
// y = x * rstd * weight; returns rstd = 1 / sqrt(mean(x^2) + eps). y may be x.
template <typename Out>
inline float rmsnorm_row_forward(const float* x, const float* weight, Out* y, int cols, float eps) {
  float squares = 0.f;
#pragma omp simd reduction(+ : squares)
  for (int c = 0; c < cols; ++c) squares += x[c] * x[c];
  const float rs = 1.f / std::sqrt(squares / cols + eps);
#pragma omp simd
  for (int c = 0; c < cols; ++c) store_as(y + c, x[c] * rs * weight[c]);
  return rs;
}

// One row's backward. With xhat = x * rstd and g = dy * weight:
// dx = rstd * (g - xhat * mean(g * xhat)) (the LayerNorm gradient without its mean terms),
// written or added to dx; dweight_partial += dy * xhat. dx may be dy (each dx[c] is written
// after its dy[c] is read).
inline void rmsnorm_row_backward(const float* dy, const float* x, const float* weight, float rstd,
                                 float* dx, float* dweight_partial, int cols, bool accumulate_dx) {
  float sum_g_xhat = 0.f;
#pragma omp simd reduction(+ : sum_g_xhat)
  for (int c = 0; c < cols; ++c) {
    const float xhat = x[c] * rstd;
    sum_g_xhat += dy[c] * weight[c] * xhat;
    dweight_partial[c] += dy[c] * xhat;
  }
  const float mean_g_xhat = sum_g_xhat / cols;
#pragma omp simd
  for (int c = 0; c < cols; ++c) {
    const float v = rstd * (dy[c] * weight[c] - x[c] * rstd * mean_g_xhat);
    dx[c] = accumulate_dx ? dx[c] + v : v;
  }
}

// Saves rstd for backward; y in fp32 or (bf16 runs, where it only feeds matrix products)
// rounded to bf16 as it is written.
void rmsnorm_forward(const float* x, const float* weight, const GemmOperandBuffer& y, float* rstd,
                     int rows, int cols, float eps);
void rmsnorm_forward(const float* x, const float* weight, float* y, float* rstd, int rows, int cols,
                     float eps);

// dx (+)= d/dx; dweight += sum_r dy * x * rstd (summed in fixed row chunks, so the result
// does not depend on the thread count).
void rmsnorm_backward(const float* dy, const float* x, const float* weight, const float* rstd,
                      float* dx, float* dweight, int rows, int cols, bool accumulate_dx);

}  // namespace trident::kernels
