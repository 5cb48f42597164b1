#include "kernels/head_rmsnorm.h"

#include <algorithm>
#include <vector>

#include "kernels/rmsnorm.h"

namespace trident::kernels {

namespace {
constexpr long kHeadRowChunk = 16;
}  // namespace

void head_rmsnorm_forward(const float* x, float* y, const HeadRows& s, const float* weight,
                          float eps, float* rstd) {
  const int d = s.head_dim;
#pragma omp parallel for schedule(static)
  for (long r = 0; r < s.rows; ++r)
    for (int h = 0; h < s.heads; ++h) {
      const long at = r * s.stride + (long)h * d;
      const float rs = rmsnorm_row_forward(x + at, weight, y + at, d, eps);
      if (rstd) rstd[r * s.heads + h] = rs;
    }
}

// In place: the row function reads each dL/dy before it writes dL/dx there.
void head_rmsnorm_backward(float* d, const float* x, const HeadRows& s, const float* weight,
                           const float* rstd, float* dweight) {
  const int hd = s.head_dim;
  const long chunks = (s.rows + kHeadRowChunk - 1) / kHeadRowChunk;
  std::vector<float> partial((size_t)chunks * hd, 0.f);
#pragma omp parallel for schedule(static)
  for (long ch = 0; ch < chunks; ++ch) {
    float* pw = partial.data() + ch * hd;
    const long end = std::min(s.rows, (ch + 1) * kHeadRowChunk);
    for (long r = ch * kHeadRowChunk; r < end; ++r)
      for (int h = 0; h < s.heads; ++h) {
        float* dh = d + r * s.stride + (long)h * hd;
        rmsnorm_row_backward(dh, x + r * s.stride + (long)h * hd, weight, rstd[r * s.heads + h], dh,
                             pw, hd, false);
      }
  }
  if (!dweight) return;  // frozen (LoRA)
  for (long ch = 0; ch < chunks; ++ch)
    for (int c = 0; c < hd; ++c) dweight[c] += partial[ch * hd + c];
}

}  // namespace trident::kernels
