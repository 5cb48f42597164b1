#include "kernels/swiglu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/fast_math.h"

namespace trident::kernels {

namespace {
// fast_exp: libm's expf is a scalar call, which keeps the loops below from vectorising.
inline float sigmoid(float x) {
  return 1.f / (1.f + fast_exp(-x));
}

// d gate and d up of one element: silu'(g) = s (1 + g (1 - s)).
template <typename Out>
inline void swiglu_grad(float d, float g, float u, Out* dg, Out* du, float& sum_g, float& sum_u) {
  const float s = sigmoid(g);
  const float gg = d * u * s * (1.f + g * (1.f - s)), gu = d * g * s;
  sum_g += gg, sum_u += gu;
  store_as(dg, gg);
  store_as(du, gu);
}

template <typename Out>
void swiglu_backward_into(const float* d_act, float* pre, float* dbias, int rows, int cols,
                          Out* out) {
  constexpr int kRowChunk = 64;  // dbias is summed per chunk: independent of the thread count
  const int chunks = (rows + kRowChunk - 1) / kRowChunk;
  std::vector<float> partial(dbias ? (size_t)chunks * 2 * cols : 0, 0.f);
#pragma omp parallel for schedule(static)
  for (int ch = 0; ch < chunks; ++ch) {
    float* acc = dbias ? partial.data() + (size_t)ch * 2 * cols : nullptr;
    for (int r = ch * kRowChunk; r < std::min(rows, (ch + 1) * kRowChunk); ++r) {
      const float* gate = pre + 2L * r * cols;
      const float* up = gate + cols;
      const float* d = d_act + (long)r * cols;
      Out* dg = out + 2L * r * cols;
      Out* du = dg + cols;
      if (acc) {
#pragma omp simd
        for (int c = 0; c < cols; ++c)
          swiglu_grad(d[c], gate[c], up[c], dg + c, du + c, acc[c], acc[cols + c]);
      } else {
#pragma omp simd
        for (int c = 0; c < cols; ++c) {
          float sum_g = 0.f, sum_u = 0.f;  // no bias to sum
          swiglu_grad(d[c], gate[c], up[c], dg + c, du + c, sum_g, sum_u);
        }
      }
    }
  }
  if (!dbias) return;
  for (int ch = 0; ch < chunks; ++ch) {
    const float* acc = partial.data() + (size_t)ch * 2 * cols;
    for (int c = 0; c < 2 * cols; ++c) dbias[c] += acc[c];
  }
}

template <typename Out>
void swiglu_forward_into(float* pre, const float* bias, Out* act, int rows, int cols) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    float* gate = pre + 2L * r * cols;
    float* up = gate + cols;
    Out* out = act + (long)r * cols;
    if (bias) {
#pragma omp simd
      for (int c = 0; c < cols; ++c) gate[c] += bias[c], up[c] += bias[cols + c];
    }
#pragma omp simd
    for (int c = 0; c < cols; ++c) store_as(out + c, gate[c] * sigmoid(gate[c]) * up[c]);
  }
}
}  // namespace

float silu_scalar(float x) {
  return x * sigmoid(x);
}

void bias_swiglu_forward(float* pre, const float* bias, float* act, int rows, int cols) {
  swiglu_forward_into(pre, bias, act, rows, cols);
}

void bias_swiglu_forward(float* pre, const float* bias, const GemmOperandBuffer& act, int rows,
                         int cols) {
  if (act.bf16)
    swiglu_forward_into(pre, bias, act.bf16, rows, cols);
  else
    swiglu_forward_into(pre, bias, act.fp32, rows, cols);
}

void swiglu_backward_inplace(const float* d_act, float* pre, int rows, int cols) {
  swiglu_backward_into(d_act, pre, nullptr, rows, cols, pre);
}

void swiglu_bias_backward(const float* d_act, float* pre, float* dbias, int rows, int cols,
                          bf16_t* d16) {
  if (d16)
    swiglu_backward_into(d_act, pre, dbias, rows, cols, d16);
  else
    swiglu_backward_into(d_act, pre, dbias, rows, cols, pre);
}

}  // namespace trident::kernels
