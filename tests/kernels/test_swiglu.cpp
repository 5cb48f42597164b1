// SwiGLU (bias + silu(gate) * up) against a double-precision reference, its backward
// (in place, one pass with the bias gradient, bf16) against central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/low_precision.h"
#include "kernels/swiglu.h"
#include "test_util.h"

namespace trident {
namespace {

using testing::numeric_gradient;
using testing::random_vector;
using testing::relative_error;
using testing::to_double;
using testing::weighted;

// act = silu(gate) * up
std::vector<double> swiglu_ref(const std::vector<double>& pre, const std::vector<double>& bias,
                               int rows, int cols) {
  std::vector<double> y((size_t)rows * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const double g = pre[2L * r * cols + c] + bias[c];
      const double u = pre[2L * r * cols + cols + c] + bias[cols + c];
      y[(size_t)r * cols + c] = g / (1 + std::exp(-g)) * u;
    }
  return y;
}

TEST(SwiGLU, ForwardAndBackwardMatchReference) {
  const int rows = 6, cols = 7;
  auto pre = random_vector(2L * rows * cols, 21, 2.f), bias = random_vector(2 * cols, 22);
  auto w = random_vector((long)rows * cols, 23);
  std::vector<float> biased = pre, act((size_t)rows * cols);
  kernels::bias_swiglu_forward(biased.data(), bias.data(), act.data(), rows, cols);
  const auto pd = to_double(pre), bd = to_double(bias);
  EXPECT_LT(relative_error(act, swiglu_ref(pd, bd, rows, cols)), 1e-5);
  // Backward: d(pre) in place of the biased pre-activation; d(bias) is its column sum.
  kernels::swiglu_backward_inplace(w.data(), biased.data(), rows, cols);
  auto num = numeric_gradient(
      [&](const std::vector<double>& v) { return weighted(swiglu_ref(v, bd, rows, cols), w); }, pd);
  EXPECT_LT(relative_error(biased, num), 1e-4);
  // The one-pass backward with the bias gradient: fp32 in place, bf16 into its own buffer
  // (pre untouched), both against the same finite differences.
  std::vector<float> biased2 = pre, act3((size_t)rows * cols), dbias(2 * cols, 0.5f);
  kernels::bias_swiglu_forward(biased2.data(), bias.data(), act3.data(), rows, cols);
  const std::vector<float> kept = biased2;
  std::vector<kernels::bf16_t> d16(2L * rows * cols);
  kernels::swiglu_bias_backward(w.data(), biased2.data(), nullptr, rows, cols, d16.data());
  EXPECT_EQ(biased2, kept);
  std::vector<float> widened(d16.size());
  kernels::from_bf16(d16.data(), widened.data(), (long)d16.size());
  EXPECT_LT(relative_error(widened, num), 1e-2);
  kernels::swiglu_bias_backward(w.data(), biased2.data(), dbias.data(), rows, cols, nullptr);
  EXPECT_LT(relative_error(biased2, num), 1e-4);
  auto num_bias = numeric_gradient(
      [&](const std::vector<double>& v) { return weighted(swiglu_ref(pd, v, rows, cols), w); }, bd);
  for (double& x : num_bias) x += 0.5;
  EXPECT_LT(relative_error(dbias, num_bias), 1e-4);
  // Without a bias the forward is the same function of pre.
  std::vector<float> plain = pre, act2((size_t)rows * cols);
  kernels::bias_swiglu_forward(plain.data(), nullptr, act2.data(), rows, cols);
  EXPECT_LT(relative_error(act2, swiglu_ref(pd, std::vector<double>(2 * cols, 0.0), rows, cols)),
            1e-5);
}

}  // namespace
}  // namespace trident
