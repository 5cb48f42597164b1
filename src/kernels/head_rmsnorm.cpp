#include "kernels/head_rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace trident::kernels {

namespace {
constexpr long kRowChunk = 16;
}  // namespace

void head_rmsnorm_forward(const float* x, float* y, const HeadRows& s, const float* weight,
                          float eps, float* rstd) {
  const int d = s.head_dim;
#pragma omp parallel for schedule(static)
  for (long r = 0; r < s.rows; ++r)
    for (int h = 0; h < s.heads; ++h) {
      const float* xh = x + r * s.stride + (long)h * d;
      float* yh = y + r * s.stride + (long)h * d;
      float squares = 0.f;
#pragma omp simd reduction(+ : squares)
      for (int c = 0; c < d; ++c) squares += xh[c] * xh[c];
      const float rs = 1.f / std::sqrt(squares / d + eps);
#pragma omp simd
      for (int c = 0; c < d; ++c) yh[c] = xh[c] * rs * weight[c];
      if (rstd) rstd[r * s.heads + h] = rs;
    }
}

// With xhat = x * rstd and g = dy * weight: dx = rstd * (g - xhat * mean(g * xhat)).
void head_rmsnorm_backward(float* d, const float* x, const HeadRows& s, const float* weight,
                           const float* rstd, float* dweight) {
  const int hd = s.head_dim;
  const long chunks = (s.rows + kRowChunk - 1) / kRowChunk;
  std::vector<float> partial((size_t)chunks * hd, 0.f);
#pragma omp parallel for schedule(static)
  for (long ch = 0; ch < chunks; ++ch) {
    float* pw = partial.data() + ch * hd;
    const long end = std::min(s.rows, (ch + 1) * kRowChunk);
    for (long r = ch * kRowChunk; r < end; ++r)
      for (int h = 0; h < s.heads; ++h) {
        float* dh = d + r * s.stride + (long)h * hd;
        const float* xh = x + r * s.stride + (long)h * hd;
        const float rs = rstd[r * s.heads + h];
        float sum_g_xhat = 0.f;
#pragma omp simd reduction(+ : sum_g_xhat)
        for (int c = 0; c < hd; ++c) {
          const float xhat = xh[c] * rs;
          sum_g_xhat += dh[c] * weight[c] * xhat;
          pw[c] += dh[c] * xhat;
        }
        const float mean_g_xhat = sum_g_xhat / hd;
#pragma omp simd
        for (int c = 0; c < hd; ++c) dh[c] = rs * (dh[c] * weight[c] - xh[c] * rs * mean_g_xhat);
      }
  }
  for (long ch = 0; ch < chunks; ++ch)
    for (int c = 0; c < hd; ++c) dweight[c] += partial[ch * hd + c];
}

}  // namespace trident::kernels
