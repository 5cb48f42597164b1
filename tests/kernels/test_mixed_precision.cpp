// 16-bit formats and the bf16 matrix products: rounding against an independent rule
// (pick the nearer of the two neighbouring representable values, ties to even mantissa),
// fp16 facts from IEEE 754, oneDNN's bf16 matmul against a double-precision product of
// the rounded operands, the mixed-precision Linear, and Megatron's loss-scaler schedule.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/elementwise.h"
#include "kernels/layernorm.h"
#include "kernels/mixed_linear.h"
#include "kernels/tile_gemm.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "test_util.h"

namespace trident {
namespace {

using kernels::Precision;
using testing::random_vector;

float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The nearer of the two bf16 neighbours of x; on a tie, the one with an even mantissa.
float bf16_reference(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  float down = bits_to_float(u & 0xffff0000u), up = bits_to_float((u & 0xffff0000u) + 0x10000u);
  double dd = std::abs((double)x - down), du = std::abs((double)up - x);
  if (dd != du) return dd < du ? down : up;
  return ((u >> 16) & 1u) ? up : down;
}

TEST(Bf16, RoundsToNearestEven) {
  auto x = random_vector(20000, 3, 10.f);
  x.push_back(bits_to_float(0x3f808000u));  // exact tie, even below
  x.push_back(bits_to_float(0x3f818000u));  // exact tie, odd below: rounds up
  x.push_back(0.f), x.push_back(-0.f), x.push_back(1e-40f);
  std::vector<kernels::bf16_t> b(x.size());
  std::vector<float> back(x.size());
  kernels::to_bf16(x.data(), b.data(), (long)x.size());
  kernels::from_bf16(b.data(), back.data(), (long)x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(back[i], bf16_reference(x[i])) << x[i];
  EXPECT_EQ(back[x.size() - 5], 1.f);        // 0x3f80: the even neighbour
  EXPECT_EQ(back[x.size() - 4], 1.015625f);  // 0x3f82
  float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  float big = 3.4e38f;  // rounds past the largest bf16: inf, as hardware does
  kernels::bf16_t out[3];
  float special[3] = {inf, nan, big}, got[3];
  kernels::to_bf16(special, out, 3);
  kernels::from_bf16(out, got, 3);
  EXPECT_EQ(got[0], inf);
  EXPECT_TRUE(std::isnan(got[1]));
  EXPECT_EQ(got[2], inf);
}

TEST(Fp16, IeeeBinary16Facts) {
  float x[] = {1.f, 65504.f, 65519.f, 65520.f, 1.f + 1.f / 2048, 1.f + 3.f / 2048, 6e-8f, 1e-8f};
  float expect[] = {1.f, 65504.f, 65504.f, INFINITY, 1.f, 1.f + 1.f / 512, 5.9604645e-8f, 0.f};
  float got[8];
  kernels::round_through_fp16(x, got, 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(got[i], expect[i]) << x[i];
  kernels::fp16_t h[8];
  float back[8];
  kernels::to_fp16(x, h, 8);
  kernels::from_fp16(h, back, 8);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(back[i], expect[i]);
  EXPECT_EQ(h[0], 0x3c00);  // 1.0 in binary16
}

// The integer rounding (for compilers without _Float16) against the compiler's conversion
// over every 257th bit pattern: all exponents, signs and rounding cases (once checked over
// all 2^32); NaN becomes the quiet NaN.
TEST(Fp16, PortableRoundingMatchesTheCompilers) {
  long differ = 0;
  for (std::uint64_t b = 0; b < (1ull << 32); b += 257) {
    float x = std::bit_cast<float>((std::uint32_t)b);
    kernels::fp16_t portable = kernels::fp16_from_float_portable(x);
    if (std::isnan(x))
      differ += (portable & 0x7fff) != 0x7e00;
    else
      differ += portable != kernels::fp16_from_float(x);
  }
  EXPECT_EQ(differ, 0);
  EXPECT_EQ(kernels::fp16_from_float_portable(65520.f), 0x7c00);
  EXPECT_EQ(kernels::fp16_from_float_portable(-6e-8f), 0x8001);
}

std::vector<float> rounded_bf16(const std::vector<float>& x) {
  std::vector<float> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = bf16_reference(x[i]);
  return r;
}

// C = op(A) op(B) (+ C) in double from row-major operands.
std::vector<double> product(bool ta, bool tb, int m, int n, int k, const std::vector<float>& a,
                            const std::vector<float>& b, const std::vector<float>& c0,
                            bool accumulate) {
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

TEST(GemmBf16, EveryTransposeAndAccumulateMatchDoubleProductOfRoundedOperands) {
  const int m = 37, n = 29, k = 70;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool acc : {false, true}) {
        auto a = random_vector(m * k, 5), b = random_vector(k * n, 6), c = random_vector(m * n, 7);
        std::vector<kernels::bf16_t> a16(a.size()), b16(b.size());
        kernels::to_bf16(a.data(), a16.data(), (long)a.size());
        kernels::to_bf16(b.data(), b16.data(), (long)b.size());
        auto expect = product(ta, tb, m, n, k, rounded_bf16(a), rounded_bf16(b), c, acc);
        using kernels::Trans;
        kernels::gemm_bf16(ta ? Trans::kYes : Trans::kNo, tb ? Trans::kYes : Trans::kNo, m, n, k,
                           a16.data(), ta ? m : k, b16.data(), tb ? k : n, acc ? 1.f : 0.f,
                           c.data(), n);
        // Products of bf16 values are exact in fp32; only the fp32 sums round.
        EXPECT_LT(testing::relative_error(c, expect), 1e-5) << ta << tb << acc;
      }
}

// The attention tiles' bf16 kernel (written here, on avx512_bf16): odd sizes exercise the
// padding of k to pairs, of n to 16 lanes and the 4-row blocking's remainder.
TEST(TileGemm, Bf16MatchesDoubleProductOfRoundedOperands) {
  for (auto [m, n, k] : {std::array<int, 3>{37, 45, 33}, {64, 64, 64}, {5, 16, 1}, {70, 64, 128}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool acc : {false, true}) {
          auto a = random_vector(m * k, 11), b = random_vector(k * n, 12),
               c = random_vector(m * n, 13);
          auto expect = product(ta, tb, m, n, k, rounded_bf16(a), rounded_bf16(b), c, acc);
          using kernels::Trans;
          std::vector<float> got = c;
          kernels::tile_gemm(Precision::kBf16, ta ? Trans::kYes : Trans::kNo,
                             tb ? Trans::kYes : Trans::kNo, m, n, k, 1.f, a.data(), ta ? m : k,
                             b.data(), tb ? k : n, acc ? 1.f : 0.f, got.data(), n);
          EXPECT_LT(testing::relative_error(got, expect), 1e-5) << m << " " << ta << tb << acc;
          // alpha scales the product, not the accumulated C
          std::vector<float> half = c;
          kernels::tile_gemm(Precision::kBf16, ta ? Trans::kYes : Trans::kNo,
                             tb ? Trans::kYes : Trans::kNo, m, n, k, 0.5f, a.data(), ta ? m : k,
                             b.data(), tb ? k : n, acc ? 1.f : 0.f, half.data(), n);
          for (int i = 0; i < m * n; ++i)
            ASSERT_NEAR(half[i], 0.5f * (got[i] - (acc ? c[i] : 0.f)) + (acc ? c[i] : 0.f),
                        1e-4f * (1.f + std::abs(got[i])));
        }
}

TEST(MixedLinear, Bf16AndFp16MatchTheProductOfTheirRoundedOperands) {
  const int rows = 24, in = 40, out = 56;
  auto x = random_vector(rows * in, 8), w = random_vector(out * in, 9, 0.1f);
  auto dy = random_vector(rows * out, 10, 1e-3f);
  // bf16 twice: the weight gradient accumulated in place (gemm_bf16, as the output layer) and
  // through the inner-product kernel's fresh product plus an add (as the layers).
  for (auto [p, fresh_weight_grad] :
       {std::pair{Precision::kBf16, false}, {Precision::kBf16, true}, {Precision::kFp16, false}}) {
    std::vector<std::uint16_t> w16(w.size()), act16(rows * 64), in16(rows * 64);
    std::vector<float> act32(rows * 64), in32(rows * 64), w32(w.size()), dw_fresh(w.size());
    kernels::LinearPrecision lp{p,
                                {act16.data(), in16.data(), act32.data(), in32.data(), w32.data()}};
    if (fresh_weight_grad) {
      lp.scratch.weight_grad32 = dw_fresh.data();
      lp.scratch.weight_grad32_floats = (long)dw_fresh.size();
    }
    std::vector<float> y(rows * out), dx(rows * in), dw(w.size(), 0.5f);
    auto round = [&](const std::vector<float>& v) {
      if (p == Precision::kBf16) return rounded_bf16(v);
      std::vector<float> r(v.size());
      kernels::round_through_fp16(v.data(), r.data(), (long)v.size());
      return r;
    };
    if (p == Precision::kBf16)
      kernels::to_bf16(w.data(), w16.data(), (long)w.size());
    else
      kernels::to_fp16(w.data(), w16.data(), (long)w.size());
    kernels::mixed_linear_forward(lp, x.data(), {w.data(), w16.data()}, y.data(), rows, in, out);
    kernels::mixed_linear_backward(lp, dy.data(), x.data(), {w.data(), w16.data()}, dx.data(),
                                   dw.data(), rows, in, out);
    auto xr = round(x), wr = round(w), dyr = round(dy);
    std::vector<float> half(w.size(), 0.5f);
    EXPECT_LT(testing::relative_error(y, product(false, true, rows, out, in, xr, wr, {}, false)),
              1e-5);
    EXPECT_LT(testing::relative_error(dx, product(false, false, rows, in, out, dyr, wr, {}, false)),
              1e-5);
    EXPECT_LT(testing::relative_error(dw, product(true, false, out, in, rows, dyr, xr, half, true)),
              1e-5)
        << fresh_weight_grad;
    if (fresh_weight_grad) {
      EXPECT_NE(dw_fresh, std::vector<float>(w.size()));  // the path ran
    }
    // ...and they are not the fp32 answer: the rounding happened.
    EXPECT_GT(testing::relative_error(y, product(false, true, rows, out, in, x, w, {}, false)),
              1e-5);
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

TEST(AdamW, FusedUpdateKeepsTheBf16CopyCurrent) {
  ModelConfig c;
  c.num_layers = 1, c.hidden_size = 16, c.num_attention_heads = 2, c.seq_length = 8;
  c.vocab_size = 50;
  Parameters p(ParameterLayout(c, {0, 1}));
  p.set_low_precision(Precision::kBf16);
  p.initialize(3, 0.5f, 1);
  auto g = random_vector(p.size(), 4);
  std::copy(g.begin(), g.end(), p.grads());
  AdamW opt(AdamWConfig{}, p.size());
  opt.update(p, 1e-2f, 1.f);
  std::vector<kernels::bf16_t> expect(p.size());
  kernels::to_bf16(p.values(), expect.data(), p.size());
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), p.low_values()));
}

TEST(LossScaler, FollowsMegatronsDynamicSchedule) {
  LossScaler s = LossScaler::dynamic(1024.f, 256.f, 3, 2);
  EXPECT_TRUE(s.update(true));  // first overflow: skipped, hysteresis absorbs it
  EXPECT_EQ(s.scale(), 1024.f);
  EXPECT_TRUE(s.update(true));  // second: halves
  EXPECT_EQ(s.scale(), 512.f);
  EXPECT_TRUE(s.update(true));  // hysteresis spent: halves again
  EXPECT_EQ(s.scale(), 256.f);
  EXPECT_TRUE(s.update(true));  // never below the minimum
  EXPECT_EQ(s.scale(), 256.f);
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 256.f);
  EXPECT_FALSE(s.update(false));  // third clean step in a row: doubles, hysteresis reset
  EXPECT_EQ(s.scale(), 512.f);
  EXPECT_TRUE(s.update(true));  // one overflow is absorbed again
  EXPECT_EQ(s.scale(), 512.f);
  EXPECT_EQ(s.state().skipped, 5);
  LossScaler fixed = LossScaler::constant(128.f);
  EXPECT_TRUE(fixed.update(true));
  EXPECT_EQ(fixed.scale(), 128.f);
}

}  // namespace
}  // namespace trident
