// Normals drawn eight at a time, against the one-at-a-time definition, bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "core/normal_fill.h"
#include "core/random.h"

namespace trident {
namespace {

// The vectorised draw against the scalar definition it must reproduce bit for bit: several
// sigmas (GPT-2's 0.02, the scaled output-projection sigma, 1), offsets and lengths that
// are not multiples of the vector width; fallbacks to the scalar path stay rare.
TEST(NormalFill, EqualsTheScalarDrawBitForBit) {
  const long before = normal_fill_fallbacks();
  long total = 0;
  for (double sigma : {0.02, 0.02 / std::sqrt(24.0), 1.0})
    for (std::uint64_t first : {0ull, 13ull, 1ull << 33}) {
      const long n = 400'003;
      std::vector<float> got(n);
      normal_fill(got.data(), n, sigma, 1234, hash_string("h.0.mlp.c_fc.weight"), first);
      for (long i = 0; i < n; ++i) {
        const float want = (float)(sigma * normal_at(1234, hash_string("h.0.mlp.c_fc.weight"),
                                                     first + (std::uint64_t)i));
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got[i]), std::bit_cast<std::uint32_t>(want))
            << "sigma " << sigma << " index " << first + i;
      }
      total += n;
    }
  EXPECT_LT(normal_fill_fallbacks() - before, total / 10000);  // ~2e-6 measured
}

}  // namespace
}  // namespace trident
