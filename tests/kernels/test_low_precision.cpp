// 16-bit formats: bf16 rounding against an independent rule (the nearer of the two
// neighbouring representable values, ties to even mantissa), fp16 facts from IEEE 754, and
// oneDNN's bf16 matmul, and the widened products CPUs without bf16 kernels use, against a
// double-precision product of the rounded operands.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/bf16_widened.h"
#include "kernels/kernels_test_util.h"
#include "kernels/low_precision.h"
#include "test_util.h"

namespace trident {
namespace {

using kernels_test::bf16_reference;
using kernels_test::bits_to_float;
using kernels_test::product;
using kernels_test::rounded_bf16;
using testing::random_vector;

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

// binary16 decoded from its fields: sign, 5-bit exponent (bias 15), 10-bit fraction.
double decode_binary16(kernels::fp16_t h) {
  const int exponent = (h >> 10) & 31, fraction = h & 1023;
  const double sign = h & 0x8000 ? -1 : 1;
  if (exponent == 31) return fraction ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(fraction, -24);
  return sign * std::ldexp(1024 + fraction, exponent - 25);
}

// The array conversions (8 at a time with F16C, the rest one by one: the lengths are not
// multiples of 8) against the integer rounding and the decoding above: every 4099th fp32 bit
// pattern, and all 65536 binary16 ones.
TEST(Fp16, ArrayConversionsMatchTheFormatsDefinition) {
  std::vector<float> x;
  for (std::uint64_t b = 0; b < (1ull << 32); b += 4099)
    x.push_back(std::bit_cast<float>((std::uint32_t)b));
  x.push_back(65520.f), x.push_back(-6e-8f), x.push_back(65519.f);
  ASSERT_NE(x.size() % 8, 0u);
  const long n = (long)x.size();
  std::vector<kernels::fp16_t> h(n);
  kernels::to_fp16(x.data(), h.data(), n);
  std::vector<float> rounded = x;
  kernels::round_through_fp16(rounded.data(), rounded.data(), n);  // in place, as allowed
  long wrong = 0;
  for (long i = 0; i < n; ++i) {
    if (std::isnan(x[i])) {
      wrong += !std::isnan(decode_binary16(h[i])) + !std::isnan(rounded[i]);
      continue;
    }
    const kernels::fp16_t want = kernels::fp16_from_float_portable(x[i]);
    wrong += h[i] != want;
    wrong += (double)rounded[i] != decode_binary16(want);
  }
  EXPECT_EQ(wrong, 0);
  std::vector<kernels::fp16_t> every(65536 + 3);
  for (size_t i = 0; i < every.size(); ++i) every[i] = (kernels::fp16_t)(i * 40503u);
  std::vector<float> widened(every.size());
  kernels::from_fp16(every.data(), widened.data(), (long)every.size());
  for (size_t i = 0; i < every.size(); ++i) {
    const double want = decode_binary16(every[i]);
    if (std::isnan(want))
      wrong += !std::isnan(widened[i]);
    else
      wrong += (double)widened[i] != want || std::signbit(widened[i]) != std::signbit(want);
  }
  EXPECT_EQ(wrong, 0);
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

// Stored with leading dimension cols + pad; the padding holds NaN, which a product that read
// it would carry into every result it touched.
std::vector<kernels::bf16_t> padded_bf16(const std::vector<float>& dense, int rows, int cols,
                                         int pad) {
  std::vector<kernels::bf16_t> dense16(dense.size());
  kernels::to_bf16(dense.data(), dense16.data(), (long)dense.size());
  std::vector<kernels::bf16_t> out((size_t)rows * (cols + pad), 0x7fc0);  // bf16 NaN
  for (int r = 0; r < rows; ++r)
    std::copy_n(dense16.begin() + (long)r * cols, cols, out.begin() + (long)r * (cols + pad));
  return out;
}

// The path AVX2 CPUs take, run here whatever this CPU is: strided operands, every transpose,
// written or accumulated, in blocks of 16 along k (70: a remainder of 6) and of 10 rows and
// columns (37 x 29: remainders in both), and an empty inner dimension (C = beta C).
TEST(GemmBf16Widened, StridedOperandsMatchDoubleProductOfRoundedOperands) {
  using kernels::Trans;
  for (int k : {70, 0})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool acc : {false, true}) {
          const int m = 37, n = 29, pad = 3;
          auto a = random_vector(m * k, 8), b = random_vector(k * n, 9),
               c = random_vector(m * n, 10);
          auto expect = product(ta, tb, m, n, k, rounded_bf16(a), rounded_bf16(b), c, acc);
          const int a_cols = ta ? m : k, b_cols = tb ? k : n;
          auto a16 = padded_bf16(a, ta ? k : m, a_cols, pad);
          auto b16 = padded_bf16(b, tb ? n : k, b_cols, pad);
          kernels::gemm_bf16_widened(ta ? Trans::kYes : Trans::kNo, tb ? Trans::kYes : Trans::kNo,
                                     m, n, k, a16.data(), a_cols + pad, b16.data(), b_cols + pad,
                                     acc ? 1.f : 0.f, c.data(), n, 10 * 16, 16);
          if (k == 0)  // nothing summed: C kept or cleared exactly
            EXPECT_EQ(c, std::vector<float>(expect.begin(), expect.end())) << ta << tb << acc;
          else
            EXPECT_LT(testing::relative_error(c, expect), 1e-5) << ta << tb << acc;
        }
}

}  // namespace
}  // namespace trident
