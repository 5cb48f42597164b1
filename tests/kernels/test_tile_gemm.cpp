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

// The attention tiles' bf16 kernel (written here, on avx512_bf16): odd sizes exercise the
// padding of k to pairs, of n to 16 lanes and the 6- and 4-row blockings' remainders.
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

}  // namespace
}  // namespace trident
