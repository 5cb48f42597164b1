#include "kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace trident::kernels {

namespace {
constexpr int kRowChunk = 32;

template <typename Out>
void rmsnorm_forward_into(const float* x, const float* weight, Out* y, float* rstd, int rows,
                          int cols, float eps) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + (long)r * cols;
    Out* yr = y + (long)r * cols;
    float squares = 0.f;
#pragma omp simd reduction(+ : squares)
    for (int c = 0; c < cols; ++c) squares += xr[c] * xr[c];
    const float rs = 1.f / std::sqrt(squares / cols + eps);
#pragma omp simd
    for (int c = 0; c < cols; ++c) store_as(yr + c, xr[c] * rs * weight[c]);
    rstd[r] = rs;
  }
}
}  // namespace

void rmsnorm_forward(const float* x, const float* weight, float* y, float* rstd, int rows, int cols,
                     float eps) {
  rmsnorm_forward_into(x, weight, y, rstd, rows, cols, eps);
}

void rmsnorm_forward(const float* x, const float* weight, const GemmOperandBuffer& y, float* rstd,
                     int rows, int cols, float eps) {
  if (y.bf16)
    rmsnorm_forward_into(x, weight, y.bf16, rstd, rows, cols, eps);
  else
    rmsnorm_forward_into(x, weight, y.fp32, rstd, rows, cols, eps);
}

// With xhat = x * rstd and g = dy * weight: dx = rstd * (g - xhat * mean(g * xhat)), the
// LayerNorm gradient without its mean terms.
void rmsnorm_backward(const float* dy, const float* x, const float* weight, const float* rstd,
                      float* dx, float* dweight, int rows, int cols, bool accumulate_dx) {
  const int chunks = (rows + kRowChunk - 1) / kRowChunk;
  std::vector<float> partial((size_t)chunks * cols, 0.f);
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    float* pw = partial.data() + (size_t)ch * cols;
    const int end = std::min(rows, (ch + 1) * kRowChunk);
    for (int r = ch * kRowChunk; r < end; ++r) {
      const float* dyr = dy + (long)r * cols;
      const float* xr = x + (long)r * cols;
      float* dxr = dx + (long)r * cols;
      const float rs = rstd[r];
      float sum_g_xhat = 0.f;
#pragma omp simd reduction(+ : sum_g_xhat)
      for (int c = 0; c < cols; ++c) {
        const float xhat = xr[c] * rs;
        sum_g_xhat += dyr[c] * weight[c] * xhat;
        pw[c] += dyr[c] * xhat;
      }
      const float mean_g_xhat = sum_g_xhat / cols;
#pragma omp simd
      for (int c = 0; c < cols; ++c) {
        const float v = rs * (dyr[c] * weight[c] - xr[c] * rs * mean_g_xhat);
        dxr[c] = accumulate_dx ? dxr[c] + v : v;
      }
    }
  }
  for (int ch = 0; ch < chunks; ++ch) {
    const float* pw = partial.data() + (size_t)ch * cols;
    for (int c = 0; c < cols; ++c) dweight[c] += pw[c];
  }
}

}  // namespace trident::kernels
