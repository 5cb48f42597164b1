// The element-wise kernels: GeLU (tanh form) and its derivative against the formula, the
// fused bias + GeLU forward and backward against the un-fused steps, the bias gradient against
// a row sum, and the bf16 outputs (LayerNorm, GeLU, rounded dy) against the nearest bf16 of
// the fp32 values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/kernels_test_util.h"
#include "kernels/layernorm.h"
#include "kernels/low_precision.h"
#include "test_util.h"

namespace trident {
namespace {

using kernels_test::bf16_reference;
using kernels_test::bits_to_float;
using testing::random_vector;

TEST(Gelu, TanhFormAndDerivative) {
  for (double x = -6; x <= 6; x += 0.37) {
    double ref = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(kernels::gelu_scalar((float)x), ref, 1e-6);
    auto f = [](double v) {
      return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    };
    double num = (f(x + 1e-6) - f(x - 1e-6)) / 2e-6;
    EXPECT_NEAR(kernels::gelu_grad_scalar((float)x), num, 1e-5);
  }
}

TEST(BiasGelu, ForwardAndBackward) {
  const int rows = 5, cols = 7;
  auto pre = random_vector(rows * cols, 9), bias = random_vector(cols, 10);
  std::vector<float> out(rows * cols), kept = pre;
  kernels::bias_gelu_forward(kept.data(), bias.data(), out.data(), rows, cols);
  std::vector<float> d(rows * cols, 1.f);
  kernels::gelu_backward_inplace(kept.data(), d.data(), rows * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      float v = pre[r * cols + c] + bias[c];
      EXPECT_FLOAT_EQ(kept[r * cols + c], v);
      EXPECT_FLOAT_EQ(out[r * cols + c], kernels::gelu_scalar(v));
      EXPECT_FLOAT_EQ(d[r * cols + c], kernels::gelu_grad_scalar(v));
    }
}

// The fused GeLU + bias backward against its un-fused reference (GeLU backward, then the
// bias sum), in place and in its bf16-writing form.
TEST(BiasGelu, FusedBackwardMatchesUnfused) {
  const int rows = 150, cols = 37;  // several row chunks, a ragged last one
  auto pre = random_vector(rows * cols, 19, 2.f), d_act = random_vector(rows * cols, 20);
  std::vector<float> expect = d_act, db_expect(cols, 0.25f);
  kernels::gelu_backward_inplace(pre.data(), expect.data(), (long)rows * cols);
  kernels::bias_backward(expect.data(), db_expect.data(), rows, cols);
  std::vector<float> fused = d_act, db(cols, 0.25f), db16(cols, 0.25f), scratch = d_act;
  kernels::gelu_bias_backward(pre.data(), fused.data(), db.data(), rows, cols);
  std::vector<kernels::bf16_t> d16(rows * cols);
  kernels::gelu_bias_backward(pre.data(), scratch.data(), db16.data(), rows, cols, d16.data());
  EXPECT_EQ(fused, expect);
  EXPECT_EQ(db, db_expect);
  EXPECT_EQ(db16, db_expect);
  for (int i = 0; i < rows * cols; ++i) ASSERT_EQ(d16[i], kernels::bf16_from_float(expect[i])) << i;
}

TEST(Bias, BackwardSumsRows) {
  const int rows = 130, cols = 3;
  auto dy = random_vector(rows * cols, 11);
  std::vector<float> db(cols, 0.5f);
  kernels::bias_backward(dy.data(), db.data(), rows, cols);
  for (int c = 0; c < cols; ++c) {
    double s = 0.5;
    for (int r = 0; r < rows; ++r) s += dy[r * cols + c];
    EXPECT_NEAR(db[c], s, 1e-4);
  }
}

// bf16 runs store LayerNorm and GeLU outputs only in bf16: each element must be the
// nearest bf16 of the fp32 kernel's output (what rounding at the GEMM used to give).
TEST(Bf16Outputs, LayerNormGeluAndBiasGradWriteTheNearestBf16OfTheirFp32Values) {
  const int rows = 7, cols = 45;
  auto x = random_vector(rows * cols, 31), w = random_vector(cols, 32), b = random_vector(cols, 33);
  std::vector<float> y(rows * cols), mean(rows), rstd(rows), mean16(rows), rstd16(rows);
  std::vector<kernels::bf16_t> y16(rows * cols);
  kernels::layernorm_forward(x.data(), w.data(), b.data(), y.data(), mean.data(), rstd.data(), rows,
                             cols, 1e-5f);
  kernels::layernorm_forward(x.data(), w.data(), b.data(),
                             kernels::GemmOperandBuffer{nullptr, y16.data()}, mean16.data(),
                             rstd16.data(), rows, cols, 1e-5f);
  for (int i = 0; i < rows * cols; ++i)
    ASSERT_EQ(bits_to_float((std::uint32_t)y16[i] << 16), bf16_reference(y[i])) << i;
  EXPECT_EQ(mean, mean16);
  EXPECT_EQ(rstd, rstd16);

  auto pre = random_vector(rows * cols, 34), pre16 = pre;
  std::vector<float> act(rows * cols);
  kernels::bias_gelu_forward(pre.data(), b.data(), act.data(), rows, cols);
  kernels::bias_gelu_forward(pre16.data(), b.data(), y16.data(), rows, cols);
  EXPECT_EQ(pre, pre16);  // both keep pre + bias for the backward pass
  for (int i = 0; i < rows * cols; ++i)
    ASSERT_EQ(bits_to_float((std::uint32_t)y16[i] << 16), bf16_reference(act[i])) << i;

  // The bias gradient summed in the pass that rounds dy for the backward GEMMs.
  auto dy = random_vector(rows * cols, 35);
  std::vector<float> db(cols, 0.5f), db16(cols, 0.5f);
  kernels::bias_backward(dy.data(), db.data(), rows, cols);
  kernels::bias_backward(dy.data(), db16.data(), rows, cols, y16.data());
  EXPECT_EQ(db, db16);
  for (int i = 0; i < rows * cols; ++i)
    ASSERT_EQ(bits_to_float((std::uint32_t)y16[i] << 16), bf16_reference(dy[i])) << i;
}

}  // namespace
}  // namespace trident
