#include "kernels/layernorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace trident::kernels {

namespace {
constexpr int kNormRowChunk = 32;

template <typename Out>
void layernorm_forward_into(const float* x, const float* weight, const float* bias, Out* y,
                            float* mean, float* rstd, int rows, int cols, float eps) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + (long)r * cols;
    Out* yr = y + (long)r * cols;
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < cols; ++c) sum += xr[c];
    float m = sum / cols;
    float var = 0.f;
#pragma omp simd reduction(+ : var)
    for (int c = 0; c < cols; ++c) var += (xr[c] - m) * (xr[c] - m);
    float rs = 1.f / std::sqrt(var / cols + eps);
#pragma omp simd
    for (int c = 0; c < cols; ++c) store_as(yr + c, (xr[c] - m) * rs * weight[c] + bias[c]);
    mean[r] = m;
    rstd[r] = rs;
  }
}
}  // namespace

void layernorm_forward(const float* x, const float* weight, const float* bias, float* y,
                       float* mean, float* rstd, int rows, int cols, float eps) {
  layernorm_forward_into(x, weight, bias, y, mean, rstd, rows, cols, eps);
}

void layernorm_forward(const float* x, const float* weight, const float* bias, bf16_t* y,
                       float* mean, float* rstd, int rows, int cols, float eps) {
  layernorm_forward_into(x, weight, bias, y, mean, rstd, rows, cols, eps);
}

void layernorm_forward(const float* x, const float* weight, const float* bias,
                       const GemmOperandBuffer& y, float* mean, float* rstd, int rows, int cols,
                       float eps) {
  if (y.bf16)
    layernorm_forward_into(x, weight, bias, y.bf16, mean, rstd, rows, cols, eps);
  else
    layernorm_forward_into(x, weight, bias, y.fp32, mean, rstd, rows, cols, eps);
}

void layernorm_backward(const float* dy, const float* x, const float* weight, const float* mean,
                        const float* rstd, float* dx, float* dweight, float* dbias, int rows,
                        int cols, bool accumulate_dx) {
  int chunks = (rows + kNormRowChunk - 1) / kNormRowChunk;
  std::vector<float> partial((size_t)chunks * 2 * cols, 0.f);
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    float* pw = partial.data() + (size_t)ch * 2 * cols;
    float* pb = pw + cols;
    int end = std::min(rows, (ch + 1) * kNormRowChunk);
    for (int r = ch * kNormRowChunk; r < end; ++r) {
      const float* dyr = dy + (long)r * cols;
      const float* xr = x + (long)r * cols;
      float* dxr = dx + (long)r * cols;
      float m = mean[r], rs = rstd[r];
      // dxhat = dy * w; dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
      float sum_dxhat = 0.f, sum_dxhat_xhat = 0.f;
#pragma omp simd reduction(+ : sum_dxhat, sum_dxhat_xhat)
      for (int c = 0; c < cols; ++c) {
        float xhat = (xr[c] - m) * rs;
        float dxhat = dyr[c] * weight[c];
        sum_dxhat += dxhat;
        sum_dxhat_xhat += dxhat * xhat;
        pw[c] += dyr[c] * xhat;
        pb[c] += dyr[c];
      }
      float mean_dxhat = sum_dxhat / cols, mean_dxhat_xhat = sum_dxhat_xhat / cols;
#pragma omp simd
      for (int c = 0; c < cols; ++c) {
        float xhat = (xr[c] - m) * rs;
        float v = rs * (dyr[c] * weight[c] - mean_dxhat - xhat * mean_dxhat_xhat);
        dxr[c] = accumulate_dx ? dxr[c] + v : v;
      }
    }
  }
  if (!dweight) return;  // a frozen norm (LoRA): dx alone
  for (int ch = 0; ch < chunks; ++ch) {
    const float* pw = partial.data() + (size_t)ch * 2 * cols;
    for (int c = 0; c < cols; ++c) {
      dweight[c] += pw[c];
      dbias[c] += pw[cols + c];
    }
  }
}

}  // namespace trident::kernels
