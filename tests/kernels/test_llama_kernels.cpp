// The Llama family's kernels (RMSNorm, RoPE, SwiGLU, grouped-query expansion, attention with
// RoPE and compact key/value groups): each forward against a double-precision reference
// written here from the papers' formulas, and each backward against central finite
// differences of that reference.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "kernels/attention.h"
#include "kernels/grouped_qkv.h"
#include "kernels/low_precision.h"
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

// Causal softmax attention of one sample by definition, q k v [seq, heads, d] each.
std::vector<double> attention_ref(const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, int seq, int heads, int d) {
  std::vector<double> out((size_t)seq * heads * d, 0.0);
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < seq; ++i) {
      std::vector<double> p(i + 1);
      double top = -1e300, sum = 0;
      for (int j = 0; j <= i; ++j) {
        double dot = 0;
        for (int c = 0; c < d; ++c)
          dot += q[((size_t)i * heads + h) * d + c] * k[((size_t)j * heads + h) * d + c];
        p[j] = dot / std::sqrt((double)d);
        top = std::max(top, p[j]);
      }
      for (double& x : p) sum += (x = std::exp(x - top));
      for (int j = 0; j <= i; ++j)
        for (int c = 0; c < d; ++c)
          out[((size_t)i * heads + h) * d + c] += p[j] / sum * v[((size_t)j * heads + h) * d + c];
    }
  return out;
}

// A grouped layout for the tests: rows of [q (heads) | k (groups) | v (groups)] (fused), or q
// of all rows then [k | v] of all rows (split, as linear_q and linear_kv with biases).
kernels::QkvLayout grouped_layout(int rows, int heads, int groups, int per_group, int first, int d,
                                  bool fused) {
  kernels::QkvLayout l;
  const long q = (long)heads * d, k = (long)groups * d;
  l.kv_heads = groups, l.heads_per_kv = per_group, l.first_kv = first;
  if (fused) {
    l.q_stride = l.kv_stride = q + 2 * k, l.k_offset = q, l.v_offset = q + k;
  } else {
    l.q_stride = q, l.kv_stride = 2 * k, l.k_offset = rows * q, l.v_offset = rows * q + k;
  }
  return l;
}

// The unfused path: k and v expanded to every head, RoPE applied in its own pass, packed
// attention; backward rotates the gradient back and sums the heads' into their groups.
struct Unfused {
  std::vector<float> out, lse, dqkv;
};
Unfused unfused_attention(const std::vector<float>& x, const kernels::QkvLayout& l,
                          const kernels::AttentionShape& s, const kernels::RopeConfig& rc,
                          const std::vector<float>& dout, kernels::Precision precision) {
  const long rows = (long)s.batch * s.seq, hd = (long)s.heads * s.head_dim;
  const kernels::QueryGroups g{s.heads, l.kv_heads, l.heads_per_kv, l.first_kv, s.head_dim};
  std::vector<float> qkv(rows * 3 * hd), dqkv(qkv.size());
  kernels::expand_grouped_qkv(x.data(), l.q_stride, x.data() + l.k_offset, l.kv_stride, qkv.data(),
                              rows, g);
  if (rc.rotary_dim > 0) kernels::rope_qkv(qkv.data(), s.batch, s.seq, s.heads, rc, false);
  Unfused u{std::vector<float>(rows * hd), std::vector<float>(rows * s.heads),
            std::vector<float>(x.size(), 0.f)};
  kernels::flash_attention_forward(qkv.data(), u.out.data(), u.lse.data(), s, {}, precision);
  kernels::flash_attention_backward(qkv.data(), u.out.data(), dout.data(), u.lse.data(),
                                    dqkv.data(), s, {}, precision);
  if (rc.rotary_dim > 0) kernels::rope_qkv(dqkv.data(), s.batch, s.seq, s.heads, rc, true);
  kernels::reduce_grouped_qkv_grad(dqkv.data(), u.dqkv.data(), l.q_stride,
                                   u.dqkv.data() + l.k_offset, l.kv_stride, rows, g);
  return u;
}

// Attention reading compact groups with RoPE at the tile loads against the unfused path,
// forward and backward, fp32 and bf16, over layouts: multi-head, grouped (fused and split
// projections), replicated groups with this rank's heads in group 1; RoPE full, partial
// (--rotary-percent 0.5) and off; threads 1 (a unit per group) and 3 (a unit per head, the
// groups' d k and d v summed afterwards).
TEST(FusedAttention, MatchesExpandedRotatedPath) {
  const int batch = 2, seq = 130, d = 16;  // seq spans three query and key blocks
  struct Case {
    const char* name;
    int heads, groups, per_group, first;
    bool fused;
  };
  const Case cases[] = {{"multi-head", 4, 4, 1, 0, true},
                        {"grouped fused", 4, 2, 2, 0, true},
                        {"grouped split", 6, 2, 3, 0, false},
                        {"replicated", 2, 2, 4, 1, true}};
  const int threads = omp_get_max_threads();
  for (const Case& c : cases)
    for (int rotary : {d, d / 2, 0})
      for (auto precision : {kernels::Precision::kFp32, kernels::Precision::kBf16})
        for (int nt : {1, 3}) {
          omp_set_num_threads(nt);
          const long rows = (long)batch * seq;
          const kernels::AttentionShape s{batch, seq, c.heads, d};
          kernels::QkvLayout l =
              c.heads == c.groups && c.per_group == 1
                  ? kernels::QkvLayout::packed(c.heads, d)
                  : grouped_layout((int)rows, c.heads, c.groups, c.per_group, c.first, d, c.fused);
          const long size = rows * (c.heads + 2L * c.groups) * d;
          auto x = random_vector(size, 41), dout = random_vector(rows * c.heads * d, 42);
          const kernels::RopeConfig rc{d, rotary, 10000.f};
          const Unfused ref = unfused_attention(x, l, s, rc, dout, precision);
          const kernels::RopeTable table(rc, seq);
          const kernels::RopeTable* rope = rotary > 0 ? &table : nullptr;
          std::vector<float> out(ref.out.size()), lse(ref.lse.size()), dqkv(size, 7.f);
          kernels::flash_attention_forward(x.data(), l, out.data(), lse.data(), s, {}, precision,
                                           rope);
          kernels::flash_attention_backward(x.data(), l, out.data(), dout.data(), lse.data(),
                                            dqkv.data(), s, {}, precision, rope);
          std::string what = std::string(c.name) + " rotary " + std::to_string(rotary) + " " +
                             kernels::precision_name(precision) + " threads " + std::to_string(nt);
          EXPECT_LT(relative_error(out, to_double(ref.out)), 1e-6) << what;
          EXPECT_LT(relative_error(lse, to_double(ref.lse)), 1e-6) << what;
          EXPECT_LT(relative_error(dqkv, to_double(ref.dqkv)), 1e-5) << what;
        }
  omp_set_num_threads(threads);
}

// The fused path against finite differences of attention(RoPE(q), RoPE(k), v) written by
// definition, k and v read from each head's group (--rotary-percent 0.5, two groups of two).
TEST(FusedAttention, BackwardMatchesFiniteDifferences) {
  const int seq = 5, heads = 4, groups = 2, d = 4, rotary = 2;
  const kernels::QkvLayout l = grouped_layout(seq, heads, groups, 2, 0, d, true);
  const kernels::AttentionShape s{1, seq, heads, d};
  const kernels::RopeConfig rc{d, rotary, 100.f};
  const long size = (long)seq * (heads + 2 * groups) * d;
  auto x = random_vector(size, 51), w = random_vector((long)seq * heads * d, 52);
  auto ref = [&](const std::vector<double>& v) {
    std::vector<double> q, k, vv;
    for (int t = 0; t < seq; ++t)
      for (int h = 0; h < heads; ++h)
        for (int c = 0; c < d; ++c) {
          const long row = (long)t * l.q_stride, g = h / 2;
          q.push_back(v[row + h * d + c]);
          k.push_back(v[row + l.k_offset + g * d + c]);
          vv.push_back(v[row + l.v_offset + g * d + c]);
        }
    q = rope_ref(q, seq, seq, heads, d, rotary, 100.0);
    k = rope_ref(k, seq, seq, heads, d, rotary, 100.0);
    return attention_ref(q, k, vv, seq, heads, d);
  };
  const kernels::RopeTable table(rc, seq);
  std::vector<float> out((size_t)seq * heads * d), lse((size_t)heads * seq), dx(size);
  kernels::flash_attention_forward(x.data(), l, out.data(), lse.data(), s, {},
                                   kernels::Precision::kFp32, &table);
  EXPECT_LT(relative_error(out, ref(to_double(x))), 1e-5);
  kernels::flash_attention_backward(x.data(), l, out.data(), w.data(), lse.data(), dx.data(), s, {},
                                    kernels::Precision::kFp32, &table);
  auto num = numeric_gradient([&](const std::vector<double>& v) { return weighted(ref(v), w); },
                              to_double(x));
  EXPECT_LT(relative_error(dx, num), 1e-4);
}

}  // namespace
}  // namespace trident
