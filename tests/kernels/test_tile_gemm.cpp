// The attention tiles' bf16 matrix product against a double-precision product of the
// rounded operands.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <vector>

#include "kernels/kernels_test_util.h"
#include "kernels/low_precision.h"
#include "kernels/tile_gemm.h"
#include "test_util.h"

namespace trident {
namespace {

using kernels::Precision;
using kernels_test::product;
using kernels_test::rounded_bf16;
using testing::random_vector;

// The attention tiles' bf16 product (a kernel written here on avx512_bf16, rounded operands
// through gemm() elsewhere): odd sizes exercise the padding of k to pairs, of n to 16 lanes
// and the 6- and 4-row blockings' remainders.
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

// Attention passes tiles of larger buffers (leading dimensions past the tile's width) and
// packs B once through a TileOperandCache for many tiles: both against the double product of
// the rounded dense tiles.
TEST(TileGemm, Bf16StridedTilesAndCachedBMatchTheDoubleProduct) {
  const int m = 29, n = 35, k = 24, ld = 50;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
      auto a_big = random_vector(a_rows * ld, 21), b_big = random_vector(b_rows * ld, 22);
      std::vector<float> a(a_rows * a_cols), b(b_rows * b_cols);
      for (int r = 0; r < a_rows; ++r)
        for (int c = 0; c < a_cols; ++c) a[r * a_cols + c] = a_big[r * ld + c];
      for (int r = 0; r < b_rows; ++r)
        for (int c = 0; c < b_cols; ++c) b[r * b_cols + c] = b_big[r * ld + c];
      auto expect = product(ta, tb, m, n, k, rounded_bf16(a), rounded_bf16(b), {}, false);
      kernels::TileOperandCache cache;
      using kernels::Trans;
      for (int use = 0; use < 2; ++use) {  // the second use finds B packed
        std::vector<float> got(m * ld, 7.f);
        kernels::tile_gemm(Precision::kBf16, ta ? Trans::kYes : Trans::kNo,
                           tb ? Trans::kYes : Trans::kNo, m, n, k, 1.f, a_big.data(), ld,
                           b_big.data(), ld, 0.f, got.data(), ld, &cache);
        std::vector<float> tile(m * n);
        for (int r = 0; r < m; ++r)
          for (int c = 0; c < n; ++c) tile[r * n + c] = got[r * ld + c];
        EXPECT_LT(testing::relative_error(tile, expect), 1e-5) << ta << tb << use;
        for (int r = 0; r < m; ++r)  // columns past n are not C's
          for (int c = n; c < ld; ++c) ASSERT_EQ(got[r * ld + c], 7.f);
      }
    }
}

}  // namespace
}  // namespace trident
