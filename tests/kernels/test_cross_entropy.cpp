// Softmax cross-entropy: loss and gradient (fp32 and bf16) against a double-precision
// reference, padding columns ignored; two vocabulary shards' statistics and gradients
// combined as the tensor-parallel all-reduces would give the full softmax's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cross_entropy.h"
#include "kernels/low_precision.h"
#include "test_util.h"

namespace trident {
namespace {

using testing::random_vector;

TEST(CrossEntropy, LossAndGradientMatchReferenceAndIgnorePadding) {
  const int rows = 6, cols = 20, valid = 17;  // 3 padding columns
  auto logits = random_vector(rows * cols, 15, 3.f);
  for (int r = 0; r < rows; ++r)
    for (int c = valid; c < cols; ++c) logits[r * cols + c] = 1e4f;  // would dominate if used
  std::vector<int> targets = {0, 5, 16, 3, 9, 12};
  std::vector<float> mx(rows), se(rows), tgt(rows), exps = logits;
  kernels::gather_target_logit(logits.data(), targets.data(), rows, cols, 0, tgt.data());
  kernels::softmax_exp_inplace(exps.data(), rows, cols, valid, mx.data(), se.data());
  const float scale = 0.25f;
  const kernels::SoftmaxRows softmax{exps.data(), mx.data(), mx.data(), se.data(), rows, cols, 0};
  std::vector<kernels::bf16_t> grad16(rows * cols);
  kernels::softmax_cross_entropy_backward(softmax, targets.data(), scale, grad16.data());
  std::vector<float> grad = exps;  // in place, as the fp32 path runs
  kernels::softmax_cross_entropy_backward(softmax, targets.data(), scale, grad.data());
  for (int r = 0; r < rows; ++r) {
    double m = -1e300, z = 0;
    for (int c = 0; c < valid; ++c) m = std::max(m, (double)logits[r * cols + c]);
    for (int c = 0; c < valid; ++c) z += std::exp(logits[r * cols + c] - m);
    double loss = std::log(z) + m - logits[r * cols + targets[r]];
    EXPECT_NEAR(std::log(se[r]) + mx[r] - tgt[r], loss, 1e-5);
    for (int c = 0; c < cols; ++c) {
      double p = c < valid ? std::exp(logits[r * cols + c] - m) / z : 0.0;
      double expect = c < valid ? scale * (p - (c == targets[r])) : 0.0;
      EXPECT_NEAR(grad[r * cols + c], expect, 1e-6);
      float g16;
      std::uint32_t bits = (std::uint32_t)grad16[r * cols + c] << 16;
      std::memcpy(&g16, &bits, 4);
      EXPECT_NEAR(g16, expect, std::abs(expect) / 256 + 1e-6);  // bf16: 8 significant bits
    }
  }
}

TEST(CrossEntropy, ShardedStatisticsAndGradientsCombineToTheFullSoftmax) {
  // Two vocabulary shards, combined as the tensor-parallel all-reduces would.
  const int rows = 3, cols = 16, half = 8;
  auto logits = random_vector(rows * cols, 16, 2.f);
  std::vector<float> a(rows * half), b(rows * half);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < half; ++c)
      a[r * half + c] = logits[r * cols + c], b[r * half + c] = logits[r * cols + half + c];
  std::vector<float> ma(rows), sa(rows), mb(rows), sb(rows), full_m(rows), full_s(rows);
  std::vector<float> full = logits;
  kernels::softmax_exp_inplace(a.data(), rows, half, half, ma.data(), sa.data());
  kernels::softmax_exp_inplace(b.data(), rows, half, half, mb.data(), sb.data());
  kernels::softmax_exp_inplace(full.data(), rows, cols, cols, full_m.data(), full_s.data());
  std::vector<float> gm(rows), gs(rows);
  for (int r = 0; r < rows; ++r) gm[r] = std::max(ma[r], mb[r]);
  kernels::rebase_sumexp(ma.data(), gm.data(), sa.data(), rows);
  kernels::rebase_sumexp(mb.data(), gm.data(), sb.data(), rows);
  for (int r = 0; r < rows; ++r) {
    EXPECT_FLOAT_EQ(gm[r], full_m[r]);
    EXPECT_NEAR(sa[r] + sb[r], full_s[r], 1e-5 * full_s[r]);
    gs[r] = sa[r] + sb[r];
  }
  const std::vector<int> targets = {3, 12, 8};
  kernels::softmax_cross_entropy_backward(
      {full.data(), full_m.data(), full_m.data(), full_s.data(), rows, cols, 0}, targets.data(),
      1.f, full.data());
  kernels::softmax_cross_entropy_backward(
      {a.data(), ma.data(), gm.data(), gs.data(), rows, half, 0}, targets.data(), 1.f, a.data());
  kernels::softmax_cross_entropy_backward(
      {b.data(), mb.data(), gm.data(), gs.data(), rows, half, half}, targets.data(), 1.f, b.data());
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < half; ++c) {
      EXPECT_NEAR(a[r * half + c], full[r * cols + c], 1e-6);
      EXPECT_NEAR(b[r * half + c], full[r * cols + half + c], 1e-6);
    }
}

}  // namespace
}  // namespace trident
