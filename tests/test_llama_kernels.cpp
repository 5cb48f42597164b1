// The Llama family's kernels (RMSNorm, RoPE, SwiGLU, grouped-query expansion): each forward
// against a double-precision reference written here from the papers' formulas, and each
// backward against central finite differences of that reference.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/grouped_qkv.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
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

// RoPE by its definition: complex rotation of (x_i, x_{i + r/2}) by pos * base^(-2i/r).
std::vector<double> rope_ref(const std::vector<double>& x, int rows, int seq, int heads, int d,
                             int r, double base) {
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

TEST(Rope, QkvForwardAndBackwardMatchReference) {
  const int batch = 2, seq = 5, heads = 2, d = 8;
  for (int r : {8, 4}) {  // --rotary-percent 1 and 0.5
    const kernels::RopeConfig c{d, r, 100.f};
    const long n = (long)batch * seq * 3 * heads * d;
    auto qkv = random_vector(n, 11), w = random_vector(n, 12);
    std::vector<float> y = qkv;
    kernels::rope_qkv(y.data(), batch, seq, heads, c, false);
    // The reference sees each token's q and k as 2 * heads heads, and v untouched.
    auto ref = [&](const std::vector<double>& x) {
      std::vector<double> qk, out = x;
      const long row = 3L * heads * d, qk_row = 2L * heads * d;
      for (int t = 0; t < batch * seq; ++t)
        qk.insert(qk.end(), x.begin() + t * row, x.begin() + t * row + qk_row);
      qk = rope_ref(qk, batch * seq, seq, 2 * heads, d, r, 100.0);
      for (int t = 0; t < batch * seq; ++t)
        std::copy(qk.begin() + t * qk_row, qk.begin() + (t + 1) * qk_row, out.begin() + t * row);
      return out;
    };
    EXPECT_LT(relative_error(y, ref(to_double(qkv))), 1e-5) << "rotary dim " << r;
    std::vector<float> dx = w;
    kernels::rope_qkv(dx.data(), batch, seq, heads, c, true);
    auto num = numeric_gradient([&](const std::vector<double>& v) { return weighted(ref(v), w); },
                                to_double(qkv));
    EXPECT_LT(relative_error(dx, num), 1e-4) << "rotary dim " << r;
  }
}

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
  // Without a bias the forward is the same function of pre.
  std::vector<float> plain = pre, act2((size_t)rows * cols);
  kernels::bias_swiglu_forward(plain.data(), nullptr, act2.data(), rows, cols);
  EXPECT_LT(relative_error(act2, swiglu_ref(pd, std::vector<double>(2 * cols, 0.0), rows, cols)),
            1e-5);
}

TEST(GroupedQkv, ExpandsGroupsAndSumsTheirGradients) {
  const int rows = 3, heads = 4, d = 2;
  for (int first : {0, 1}) {  // groups held, or replicated with this rank's heads in group 1
    const kernels::QueryGroups g{heads, 2, first == 0 ? 2 : 4, first, d};
    auto q = random_vector((long)rows * heads * d, 31), kv = random_vector(rows * 2L * 2 * d, 32);
    std::vector<float> qkv((size_t)rows * 3 * heads * d);
    kernels::expand_grouped_qkv(q.data(), kv.data(), qkv.data(), rows, g);
    for (int r = 0; r < rows; ++r)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < d; ++i) {
          const int group = first + h / g.heads_per_group;
          const float* row = qkv.data() + (long)r * 3 * heads * d;
          EXPECT_EQ(row[h * d + i], q[(r * heads + h) * d + i]);
          EXPECT_EQ(row[(heads + h) * d + i], kv[(r * 4 + group) * d + i]);
          EXPECT_EQ(row[(2 * heads + h) * d + i], kv[(r * 4 + 2 + group) * d + i]);
        }
    // The adjoint: <expand(q, kv), w> = <q, dq> + <kv, dkv> for every q, kv.
    auto w = random_vector((long)qkv.size(), 33);
    std::vector<float> dq(q.size()), dkv(kv.size());
    kernels::reduce_grouped_qkv_grad(w.data(), dq.data(), dkv.data(), rows, g);
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < qkv.size(); ++i) lhs += (double)qkv[i] * w[i];
    for (size_t i = 0; i < q.size(); ++i) rhs += (double)q[i] * dq[i];
    for (size_t i = 0; i < kv.size(); ++i) rhs += (double)kv[i] * dkv[i];
    EXPECT_NEAR(lhs, rhs, 1e-4);
  }
}

}  // namespace
}  // namespace trident
