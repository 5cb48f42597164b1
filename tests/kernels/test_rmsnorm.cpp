// RMSNorm's forward against a double-precision reference written here from the paper's
// formula, and its backward against central finite differences of that reference.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/rmsnorm.h"
#include "test_util.h"

namespace trident {
namespace {

using testing::numeric_gradient;
using testing::random_vector;
using testing::relative_error;
using testing::to_double;
using testing::weighted;

std::vector<double> rmsnorm_ref(const std::vector<double>& x, const std::vector<double>& g,
                                int rows, int cols, double eps) {
  std::vector<double> y(x.size());
  for (int r = 0; r < rows; ++r) {
    double ms = 0;
    for (int c = 0; c < cols; ++c) ms += x[r * cols + c] * x[r * cols + c];
    const double rs = 1 / std::sqrt(ms / cols + eps);
    for (int c = 0; c < cols; ++c) y[r * cols + c] = x[r * cols + c] * rs * g[c];
  }
  return y;
}

TEST(RMSNorm, ForwardAndBackwardMatchReference) {
  const int rows = 37, cols = 24;  // rows span several of the backward's fixed chunks
  auto x = random_vector(rows * cols, 1), g = random_vector(cols, 2),
       w = random_vector(rows * cols, 4);
  std::vector<float> y(rows * cols), rstd(rows);
  kernels::rmsnorm_forward(x.data(), g.data(), y.data(), rstd.data(), rows, cols, 1e-5f);
  const auto xd = to_double(x), gd = to_double(g);
  EXPECT_LT(relative_error(y, rmsnorm_ref(xd, gd, rows, cols, 1e-5)), 1e-5);

  std::vector<float> dx(rows * cols, 2.f), dg(cols, 0.f);
  kernels::rmsnorm_backward(w.data(), x.data(), g.data(), rstd.data(), dx.data(), dg.data(), rows,
                            cols, false);
  auto num_dx = numeric_gradient(
      [&](const std::vector<double>& v) {
        return weighted(rmsnorm_ref(v, gd, rows, cols, 1e-5), w);
      },
      xd);
  auto num_dg = numeric_gradient(
      [&](const std::vector<double>& v) {
        return weighted(rmsnorm_ref(xd, v, rows, cols, 1e-5), w);
      },
      gd);
  EXPECT_LT(relative_error(dx, num_dx), 1e-4);
  EXPECT_LT(relative_error(dg, num_dg), 1e-4);
  // accumulate_dx adds to what is there.
  std::vector<float> acc(rows * cols, 1.5f);
  kernels::rmsnorm_backward(w.data(), x.data(), g.data(), rstd.data(), acc.data(), dg.data(), rows,
                            cols, true);
  for (int i = 0; i < rows * cols; ++i) EXPECT_NEAR(acc[i], dx[i] + 1.5f, 1e-5);
}

}  // namespace
}  // namespace trident
