#pragma once
// Helpers of the tests of src/kernels/: independent references (the bf16 rounding rule, a
// double-precision matrix product, RoPE by its definition) that several kernels' tests use.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace trident::kernels_test {

inline float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The nearer of the two bf16 neighbours of x; on a tie, the one with an even mantissa.
inline float bf16_reference(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  float down = bits_to_float(u & 0xffff0000u), up = bits_to_float((u & 0xffff0000u) + 0x10000u);
  double dd = std::abs((double)x - down), du = std::abs((double)up - x);
  if (dd != du) return dd < du ? down : up;
  return ((u >> 16) & 1u) ? up : down;
}

inline std::vector<float> rounded_bf16(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = bf16_reference(x[i]);
  return r;
}

// C = op(A) op(B) (+ C) in double from row-major operands.
inline std::vector<double> product(bool ta, bool tb, int m, int n, int k,
                                   const std::vector<float>& a, const std::vector<float>& b,
                                   const std::vector<float>& c0, bool accumulate) {
  std::vector<double> c(m * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = accumulate ? c0[i * n + j] : 0.0;
      for (int p = 0; p < k; ++p)
        s += (double)(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = s;
    }
  return c;
}

// RoPE by its definition: complex rotation of (x_i, x_{i + r/2}) by pos * base^(-2i/r).
inline std::vector<double> rope_ref(const std::vector<double>& x, int rows, int seq, int heads,
                                    int d, int r, double base) {
  std::vector<double> y = x;
  for (int row = 0; row < rows; ++row)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < r / 2; ++i) {
        const double angle = (row % seq) * std::pow(base, -2.0 * i / r);
        const long lo = ((long)row * heads + h) * d + i, hi = lo + r / 2;
        y[lo] = x[lo] * std::cos(angle) - x[hi] * std::sin(angle);
        y[hi] = x[hi] * std::cos(angle) + x[lo] * std::sin(angle);
      }
  return y;
}

}  // namespace trident::kernels_test
