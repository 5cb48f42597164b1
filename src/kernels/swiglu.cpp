#include "kernels/swiglu.h"

#include <cmath>

namespace trident::kernels {

namespace {
inline float sigmoid(float x) {
  return 1.f / (1.f + std::exp(-x));
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

// d gate = d * up * silu'(gate), silu'(g) = s (1 + g (1 - s)); d up = d * silu(gate).
void swiglu_backward_inplace(const float* d_act, float* pre, int rows, int cols) {
#pragma omp parallel for schedule(static)
  for (int r = 0; r < rows; ++r) {
    float* gate = pre + 2L * r * cols;
    float* up = gate + cols;
    const float* d = d_act + (long)r * cols;
#pragma omp simd
    for (int c = 0; c < cols; ++c) {
      const float g = gate[c], u = up[c], s = sigmoid(g);
      gate[c] = d[c] * u * s * (1.f + g * (1.f - s));
      up[c] = d[c] * g * s;
    }
  }
}

}  // namespace trident::kernels
