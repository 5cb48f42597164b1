#include "kernels/rmsnorm.h"

#include <algorithm>
#include <vector>

namespace trident::kernels {

namespace {
constexpr int kRowChunk = 32;

template <typename Out>
void rmsnorm_forward_into(const float* x, const float* weight, Out* y, float* rstd, int rows,
                          int cols, float eps) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r)
    rstd[r] = rmsnorm_row_forward(x + (long)r * cols, weight, y + (long)r * cols, cols, eps);
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

void rmsnorm_backward(const float* dy, const float* x, const float* weight, const float* rstd,
                      float* dx, float* dweight, int rows, int cols, bool accumulate_dx) {
  const int chunks = (rows + kRowChunk - 1) / kRowChunk;
  std::vector<float> partial((size_t)chunks * cols, 0.f);
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    float* pw = partial.data() + (size_t)ch * cols;
    const int end = std::min(rows, (ch + 1) * kRowChunk);
    for (int r = ch * kRowChunk; r < end; ++r)
      rmsnorm_row_backward(dy + (long)r * cols, x + (long)r * cols, weight, rstd[r],
                           dx + (long)r * cols, pw, cols, accumulate_dx);
  }
  if (!dweight) return;  // a frozen norm (LoRA): dx alone
  for (int ch = 0; ch < chunks; ++ch) {
    const float* pw = partial.data() + (size_t)ch * cols;
    for (int c = 0; c < cols; ++c) dweight[c] += pw[c];
  }
}

}  // namespace trident::kernels
