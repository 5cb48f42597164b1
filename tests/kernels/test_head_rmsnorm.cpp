// The per-head RMSNorm of q and k (Qwen3) on strided rows, against a double-precision
// reference written here from the formula, and its backward against central finite
// differences of that reference. Values between the heads (the rest of a qkv row) are left
// alone.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/head_rmsnorm.h"
#include "test_util.h"

namespace trident {
namespace {

using testing::numeric_gradient;
using testing::random_vector;
using testing::relative_error;
using testing::to_double;
using testing::weighted;

constexpr int kRows = 37, kHeads = 3, kDim = 8;
constexpr long kStride = kHeads * kDim + 5;  // other values after the heads of each row

// The heads' normalised values, [rows, heads, d] (packed), from strided x.
std::vector<double> head_rmsnorm_ref(const std::vector<double>& x, const std::vector<double>& g,
                                     double eps) {
  std::vector<double> y((size_t)kRows * kHeads * kDim);
  for (int r = 0; r < kRows; ++r)
    for (int h = 0; h < kHeads; ++h) {
      const double* xh = x.data() + r * kStride + h * kDim;
      double ms = 0;
      for (int c = 0; c < kDim; ++c) ms += xh[c] * xh[c];
      const double rs = 1 / std::sqrt(ms / kDim + eps);
      for (int c = 0; c < kDim; ++c) y[(r * kHeads + h) * kDim + c] = xh[c] * rs * g[c];
    }
  return y;
}

std::vector<float> heads_of(const std::vector<float>& strided) {
  std::vector<float> out;
  for (int r = 0; r < kRows; ++r)
    for (int i = 0; i < kHeads * kDim; ++i) out.push_back(strided[r * kStride + i]);
  return out;
}

TEST(HeadRMSNorm, ForwardAndBackwardMatchReference) {
  const kernels::HeadRows s{kRows, kStride, kHeads, kDim};
  auto x = random_vector(kRows * kStride, 1), g = random_vector(kDim, 2),
       w = random_vector(kRows * kHeads * kDim, 4);
  std::vector<float> y(x.size(), 7.f), rstd(kRows * kHeads);
  kernels::head_rmsnorm_forward(x.data(), y.data(), s, g.data(), 1e-6f, rstd.data());
  const auto xd = to_double(x), gd = to_double(g);
  EXPECT_LT(relative_error(heads_of(y), head_rmsnorm_ref(xd, gd, 1e-6)), 1e-5);
  for (int r = 0; r < kRows; ++r)
    for (long i = kHeads * kDim; i < kStride; ++i) EXPECT_EQ(y[r * kStride + i], 7.f);

  // In place gives the same values.
  std::vector<float> in_place = x;
  kernels::head_rmsnorm_forward(in_place.data(), in_place.data(), s, g.data(), 1e-6f, nullptr);
  EXPECT_EQ(heads_of(in_place), heads_of(y));

  // d (strided like x) holds dL/dy on entry and dL/dx on return.
  std::vector<float> d(x.size(), 3.f), dg(kDim, 0.f);
  for (int r = 0; r < kRows; ++r)
    for (int i = 0; i < kHeads * kDim; ++i) d[r * kStride + i] = w[r * kHeads * kDim + i];
  kernels::head_rmsnorm_backward(d.data(), x.data(), s, g.data(), rstd.data(), dg.data());
  auto loss_of_x = [&](const std::vector<double>& v) {
    return weighted(head_rmsnorm_ref(v, gd, 1e-6), w);
  };
  auto num_dx = numeric_gradient(loss_of_x, xd);
  std::vector<double> num_heads;
  for (int r = 0; r < kRows; ++r)
    for (int i = 0; i < kHeads * kDim; ++i) num_heads.push_back(num_dx[r * kStride + i]);
  EXPECT_LT(relative_error(heads_of(d), num_heads), 1e-4);
  auto num_dg = numeric_gradient(
      [&](const std::vector<double>& v) { return weighted(head_rmsnorm_ref(xd, v, 1e-6), w); }, gd);
  EXPECT_LT(relative_error(dg, num_dg), 1e-4);
  for (int r = 0; r < kRows; ++r)
    for (long i = kHeads * kDim; i < kStride; ++i) EXPECT_EQ(d[r * kStride + i], 3.f);
}

}  // namespace
}  // namespace trident
