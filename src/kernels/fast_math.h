#pragma once
// exp and tanh written with plain float arithmetic so that `#pragma omp simd` loops
// vectorise (libm's expf/tanhf are scalar calls here). Cephes-style range reduction and
// polynomial: relative error below 2e-7 over the clamped range, which the kernel tests
// check against double-precision references.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace trident::kernels {

inline float fast_exp(float x) {
  x = std::min(std::max(x, -87.3f), 88.f);  // keeps 2^n finite and normal
  // Round x / ln 2 to nearest by adding and removing 1.5 * 2^23 (std::floor does not
  // vectorise without -fno-trapping-math).
  constexpr float kRound = 12582912.f;
  float n = (x * 1.44269504088896341f + kRound) - kRound;
  float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  std::int32_t bits = ((std::int32_t)n + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

inline float fast_tanh(float x) {
  return 1.f - 2.f / (fast_exp(2.f * x) + 1.f);
}

// GeLU, tanh approximation (GPT-2's "gelu_new"), and its derivative.
inline float gelu(float x) {
  constexpr float c = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.f + fast_tanh(c * (x + 0.044715f * x * x * x)));
}

inline float gelu_grad(float x) {
  constexpr float c = 0.7978845608028654f;
  float t = fast_tanh(c * (x + 0.044715f * x * x * x));
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * c * (1.f + 3.f * 0.044715f * x * x);
}

}  // namespace trident::kernels
