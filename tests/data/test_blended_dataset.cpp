// Blending: every prefix of the blended index stays within one sample of its weight.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "data/blended_dataset.h"

namespace trident::data {
namespace {

TEST(Blending, EveryPrefixWithinOneSampleOfItsWeight) {
  std::vector<double> weights = {0.3, 0.5, 0.2, 1e-3};
  std::vector<std::int16_t> which;
  std::vector<std::int64_t> index;
  build_blending_indices(weights, 20000, &which, &index);
  std::vector<long> taken(weights.size(), 0);
  double total = 0;
  for (double w : weights) total += w;
  for (long i = 0; i < 20000; ++i) {
    ASSERT_EQ(index[i], taken[which[i]]);
    ++taken[which[i]];
    for (size_t d = 0; d < weights.size(); ++d)
      ASSERT_LE(std::abs(taken[d] - weights[d] / total * (i + 1)), 1.0) << "prefix " << i + 1;
  }
}

}  // namespace
}  // namespace trident::data
