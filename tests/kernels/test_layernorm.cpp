// LayerNorm's forward against a double-precision reference written here, and its backward
// against central finite differences of that reference.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/layernorm.h"
#include "test_util.h"

namespace trident {
namespace {

using testing::numeric_gradient;
using testing::random_vector;
using testing::relative_error;
using testing::to_double;
using testing::weighted;

std::vector<double> layernorm_ref(const std::vector<double>& x, const std::vector<double>& g,
                                  const std::vector<double>& b, int rows, int cols, double eps) {
  std::vector<double> y(x.size());
  for (int r = 0; r < rows; ++r) {
    double m = 0, v = 0;
    for (int c = 0; c < cols; ++c) m += x[r * cols + c];
    m /= cols;
    for (int c = 0; c < cols; ++c) v += (x[r * cols + c] - m) * (x[r * cols + c] - m);
    double rs = 1 / std::sqrt(v / cols + eps);
    for (int c = 0; c < cols; ++c) y[r * cols + c] = (x[r * cols + c] - m) * rs * g[c] + b[c];
  }
  return y;
}

TEST(LayerNorm, ForwardAndBackwardMatchReference) {
  const int rows = 37, cols = 24;  // rows span several of the backward's fixed chunks
  auto x = random_vector(rows * cols, 1), g = random_vector(cols, 2), b = random_vector(cols, 3);
  auto w = random_vector(rows * cols, 4);
  std::vector<float> y(rows * cols), mean(rows), rstd(rows);
  kernels::layernorm_forward(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), rows,
                             cols, 1e-5f);
  EXPECT_LT(
      relative_error(y, layernorm_ref(to_double(x), to_double(g), to_double(b), rows, cols, 1e-5)),
      1e-5);

  std::vector<float> dx(rows * cols), dg(cols, 0.f), db(cols, 0.f);
  kernels::layernorm_backward(w.data(), x.data(), g.data(), mean.data(), rstd.data(), dx.data(),
                              dg.data(), db.data(), rows, cols, false);
  auto gd = to_double(g), bd = to_double(b), xd = to_double(x);
  auto num_dx = numeric_gradient(
      [&](const std::vector<double>& v) {
        return weighted(layernorm_ref(v, gd, bd, rows, cols, 1e-5), w);
      },
      xd);
  auto num_dg = numeric_gradient(
      [&](const std::vector<double>& v) {
        return weighted(layernorm_ref(xd, v, bd, rows, cols, 1e-5), w);
      },
      gd);
  auto num_db = numeric_gradient(
      [&](const std::vector<double>& v) {
        return weighted(layernorm_ref(xd, gd, v, rows, cols, 1e-5), w);
      },
      bd);
  EXPECT_LT(relative_error(dx, num_dx), 1e-4);
  EXPECT_LT(relative_error(dg, num_dg), 1e-4);
  EXPECT_LT(relative_error(db, num_db), 1e-4);
}

TEST(LayerNorm, BackwardAccumulatesIntoDx) {
  const int rows = 4, cols = 8;
  auto x = random_vector(rows * cols, 5), g = random_vector(cols, 6), b = random_vector(cols, 7);
  auto dy = random_vector(rows * cols, 8);
  std::vector<float> y(rows * cols), mean(rows), rstd(rows), dg(cols), db(cols);
  kernels::layernorm_forward(x.data(), g.data(), b.data(), y.data(), mean.data(), rstd.data(), rows,
                             cols, 1e-5f);
  std::vector<float> fresh(rows * cols), acc(rows * cols, 1.5f);
  kernels::layernorm_backward(dy.data(), x.data(), g.data(), mean.data(), rstd.data(), fresh.data(),
                              dg.data(), db.data(), rows, cols, false);
  kernels::layernorm_backward(dy.data(), x.data(), g.data(), mean.data(), rstd.data(), acc.data(),
                              dg.data(), db.data(), rows, cols, true);
  for (int i = 0; i < rows * cols; ++i) EXPECT_NEAR(acc[i], fresh[i] + 1.5f, 1e-6);
}

}  // namespace
}  // namespace trident
