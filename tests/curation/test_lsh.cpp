// Locality-sensitive hashing: the band/row choice against its S-curve, and candidate pairs
// of a hand-made band table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "curation/lsh.h"

using namespace trident::curation;

TEST(CurationLsh, ParamsAndCandidates) {
  LshParams p = choose_lsh_params(0.7, 128);
  EXPECT_EQ(p.bands, 20);  // recall-weighted: P = 0.98 at 0.75, 0.27 at 0.5
  EXPECT_EQ(p.rows, 6);
  EXPECT_NEAR(lsh_probability(0.75, p), 1 - std::pow(1 - std::pow(0.75, 6), 20), 1e-12);
  EXPECT_GT(lsh_probability(0.75, p), 0.97);
  EXPECT_LT(lsh_probability(0.5, p), 0.3);
  // Documents 0 and 2 share band 1; 1 shares nothing.
  std::vector<std::uint64_t> h = {1, 2, 3, 4, 5, 2};
  auto pairs = candidate_pairs(h, 3, 2, 64);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0], std::make_pair(0u, 2u));
}
