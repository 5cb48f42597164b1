// Each kernel's forward against a double-precision reference written here, and its
// backward against central finite differences of that reference (double precision, so
// the differences are exact to ~1e-9 and the tolerance only covers float rounding).
#include <gtest/gtest.h>

#include <cstring>

#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/fast_math.h"
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

// Causal attention in double on [batch, seq, 3, heads, hd] input; with dropout, the
// probabilities are masked element by element from the scalar generator.
std::vector<double> attention_ref(const std::vector<double>& qkv, const kernels::AttentionShape& s,
                                  const kernels::AttentionDropout& drop = {}) {
  const int hd = s.head_dim, H = s.heads;
  std::vector<double> out((size_t)s.batch * s.seq * H * hd);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < s.seq; ++i) {
        auto at = [&](int t, int which, int d) {
          return qkv[(((size_t)b * s.seq + t) * 3 + which) * H * hd + h * hd + d];
        };
        std::vector<double> p(i + 1);
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= i; ++j) {
          double acc = 0;
          for (int d = 0; d < hd; ++d) acc += at(i, 0, d) * at(j, 1, d);
          p[j] = acc / std::sqrt((double)hd);
          mx = std::max(mx, p[j]);
        }
        for (int j = 0; j <= i; ++j) sum += (p[j] = std::exp(p[j] - mx));
        if (drop.active()) {
          kernels::DropoutStream stream{drop.seed, drop.site,
                                        (std::uint32_t)(drop.first_sample + b), drop.probability};
          for (int j = 0; j <= i; ++j) {
            std::uint64_t index = ((std::uint64_t)(drop.head_offset + h) * s.seq + i) * s.seq + j;
            p[j] = kernels::dropout_keeps(stream, index) ? p[j] / (1 - drop.probability) : 0.0;
          }
        }
        for (int d = 0; d < hd; ++d) {
          double acc = 0;
          for (int j = 0; j <= i; ++j) acc += p[j] * at(j, 2, d);
          out[(((size_t)b * s.seq + i) * H + h) * hd + d] = acc / sum;
        }
      }
  return out;
}

class FlashAttention : public ::testing::TestWithParam<kernels::AttentionShape> {};

// Worst |central difference - dqkv| of sum(w * attention(qkv)) over ~samples evenly spread
// coordinates, relative to the largest derivative (at least 1).
double finite_difference_error(const std::vector<float>& qkv, const kernels::AttentionShape& s,
                               const kernels::AttentionDropout& drop, const std::vector<float>& w,
                               const std::vector<float>& dqkv, long samples) {
  const long stride = std::max<long>(1, (long)qkv.size() / samples);
  std::vector<double> x = to_double(qkv);
  double worst = 0, scale = 1;
  for (long i = 0; i < (long)qkv.size(); i += stride) {
    const double old = x[i], eps = 1e-6;
    x[i] = old + eps;
    const double up = weighted(attention_ref(x, s, drop), w);
    x[i] = old - eps;
    const double down = weighted(attention_ref(x, s, drop), w);
    x[i] = old;
    const double num = (up - down) / (2 * eps);
    worst = std::max(worst, std::abs(num - dqkv[i]));
    scale = std::max(scale, std::abs(num));
  }
  return worst / scale;
}

TEST_P(FlashAttention, ForwardMatchesFullSoftmax) {
  const kernels::AttentionShape s = GetParam();
  auto qkv = random_vector((long)s.batch * s.seq * 3 * s.heads * s.head_dim, 12);
  std::vector<float> out((size_t)s.batch * s.seq * s.heads * s.head_dim),
      lse((size_t)s.batch * s.heads * s.seq);
  kernels::flash_attention_forward(qkv.data(), out.data(), lse.data(), s);
  EXPECT_LT(relative_error(out, attention_ref(to_double(qkv), s)), 2e-5);
}

TEST_P(FlashAttention, BackwardMatchesFiniteDifferences) {
  const kernels::AttentionShape s = GetParam();
  auto qkv = random_vector((long)s.batch * s.seq * 3 * s.heads * s.head_dim, 13);
  auto w = random_vector((long)s.batch * s.seq * s.heads * s.head_dim, 14);
  std::vector<float> out(w.size()), lse((size_t)s.batch * s.heads * s.seq), dqkv(qkv.size());
  kernels::flash_attention_forward(qkv.data(), out.data(), lse.data(), s);
  kernels::flash_attention_backward(qkv.data(), out.data(), w.data(), lse.data(), dqkv.data(), s);
  // Every coordinate on small shapes; an evenly spread sample of ~600 on large ones.
  EXPECT_LT(finite_difference_error(qkv, s, {}, w, dqkv, 600), 1e-4);
}

// Attention dropout inside the tiles against the reference with the same masks, forward
// and (finite differences, masks fixed) backward.
TEST_P(FlashAttention, DropoutMatchesMaskedReference) {
  const kernels::AttentionShape s = GetParam();
  const kernels::AttentionDropout drop{0.3f, 99, 7, 5, 1};
  auto qkv = random_vector((long)s.batch * s.seq * 3 * s.heads * s.head_dim, 15);
  auto w = random_vector((long)s.batch * s.seq * s.heads * s.head_dim, 16);
  std::vector<float> out(w.size()), lse((size_t)s.batch * s.heads * s.seq), dqkv(qkv.size());
  kernels::flash_attention_forward(qkv.data(), out.data(), lse.data(), s, drop);
  std::vector<double> x = to_double(qkv);
  EXPECT_LT(relative_error(out, attention_ref(x, s, drop)), 2e-5);
  EXPECT_GT(relative_error(out, attention_ref(x, s)), 1e-2);  // the masks do something
  kernels::flash_attention_backward(qkv.data(), out.data(), w.data(), lse.data(), dqkv.data(), s,
                                    drop);
  EXPECT_LT(finite_difference_error(qkv, s, drop, w, dqkv, 300), 1e-4);
}

// bf16 tile products: the output against the double reference and the gradient against the
// fp32 kernel's (itself checked by finite differences above), within bf16's 8 significant
// bits; and not equal to fp32's, so the bf16 path did run.
TEST_P(FlashAttention, Bf16TilesTrackTheReference) {
  const kernels::AttentionShape s = GetParam();
  const auto bf16 = kernels::Precision::kBf16;
  const kernels::AttentionDropout drop{0.2f, 5, 3, 0, 0};
  auto qkv = random_vector((long)s.batch * s.seq * 3 * s.heads * s.head_dim, 17);
  auto dout = random_vector((long)s.batch * s.seq * s.heads * s.head_dim, 18);
  std::vector<float> out(dout.size()), lse((size_t)s.batch * s.heads * s.seq), dqkv(qkv.size());
  std::vector<float> out32 = out, lse32 = lse, dqkv32 = dqkv;
  kernels::flash_attention_forward(qkv.data(), out.data(), lse.data(), s, drop, bf16);
  const double err = relative_error(out, attention_ref(to_double(qkv), s, drop));
  EXPECT_LT(err, 1e-2);
  EXPECT_GT(err, 1e-5);
  kernels::flash_attention_forward(qkv.data(), out32.data(), lse32.data(), s, drop);
  kernels::flash_attention_backward(qkv.data(), out32.data(), dout.data(), lse32.data(),
                                    dqkv32.data(), s, drop);
  kernels::flash_attention_backward(qkv.data(), out.data(), dout.data(), lse.data(), dqkv.data(), s,
                                    drop, bf16);
  const double grad_err = relative_error(dqkv, to_double(dqkv32));
  EXPECT_LT(grad_err, 2e-2);
  EXPECT_GT(grad_err, 1e-5);
}

// Sequences shorter than, equal to and not a multiple of the 64-row tiles.
INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttention,
                         ::testing::Values(kernels::AttentionShape{1, 5, 2, 4},
                                           kernels::AttentionShape{2, 70, 2, 8},
                                           kernels::AttentionShape{1, 131, 3, 16},
                                           kernels::AttentionShape{2, 64, 1, 8}));

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

TEST(Embedding, LookupOnlyInsideTheShardAndScatterAddBackward) {
  const int vocab_rows = 4, cols = 70, start = 4;  // shard holds ids 4..7
  auto table = random_vector(vocab_rows * cols, 17);
  std::vector<int> ids = {4, 9, 7, 4, 0};
  std::vector<float> out(ids.size() * cols);
  kernels::embedding_forward(ids.data(), (int)ids.size(), table.data(), start, vocab_rows, cols,
                             out.data());
  for (size_t i = 0; i < ids.size(); ++i)
    for (int c = 0; c < cols; ++c) {
      int local = ids[i] - start;
      float expect = (local >= 0 && local < vocab_rows) ? table[local * cols + c] : 0.f;
      EXPECT_EQ(out[i * cols + c], expect);
    }
  auto dout = random_vector((long)ids.size() * cols, 18);
  std::vector<float> dtable(vocab_rows * cols, 0.f);
  kernels::embedding_backward(ids.data(), (int)ids.size(), dout.data(), start, vocab_rows, cols,
                              dtable.data());
  for (int c = 0; c < cols; ++c) {
    EXPECT_FLOAT_EQ(dtable[0 * cols + c], dout[0 * cols + c] + dout[3 * cols + c]);
    EXPECT_FLOAT_EQ(dtable[3 * cols + c], dout[2 * cols + c]);
    EXPECT_EQ(dtable[1 * cols + c], 0.f);
  }
}

}  // namespace
}  // namespace trident

namespace trident {
namespace {

TEST(FastMath, ExpAndTanhWithinFloatRounding) {
  double worst_exp = 0, worst_tanh = 0;
  for (double x = -80; x <= 80; x += 0.0137) {
    worst_exp =
        std::max(worst_exp, std::abs(kernels::fast_exp((float)x) - std::exp((double)(float)x)) /
                                std::exp((double)(float)x));
    worst_tanh =
        std::max(worst_tanh, std::abs(kernels::fast_tanh((float)x) - std::tanh((double)(float)x)));
  }
  EXPECT_LT(worst_exp, 3e-7);
  EXPECT_LT(worst_tanh, 2e-7);
  EXPECT_EQ(kernels::fast_exp(-1e30f), kernels::fast_exp(-87.3f));  // clamped, never inf/nan
  EXPECT_TRUE(std::isfinite(kernels::fast_exp(1e30f)));
}

}  // namespace
}  // namespace trident
