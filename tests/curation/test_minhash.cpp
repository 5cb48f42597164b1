// MinHash signatures: the fraction of equal entries estimates the shingles' Jaccard index.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "curation/minhash.h"

using namespace trident::curation;

TEST(CurationMinhash, EstimatesJaccard) {
  std::string a, b;
  for (int i = 0; i < 400; ++i) {
    a += "w" + std::to_string(i) + " ";
    b += (i % 10 == 0 ? "z" : "w") + std::to_string(i) + " ";
  }
  const double j = jaccard(shingle_hashes(a, 5), shingle_hashes(b, 5));
  MinHasher h(256, 1);
  std::vector<std::uint32_t> sa(256), sb(256);
  h.signature(a, 5, sa.data());
  h.signature(b, 5, sb.data());
  int same = 0;
  for (int i = 0; i < 256; ++i) same += sa[i] == sb[i];
  EXPECT_NEAR(same / 256.0, j, 4 * std::sqrt(j * (1 - j) / 256));
  EXPECT_EQ(jaccard(shingle_hashes("a b c", 5), shingle_hashes("a b c", 5)), 1.0);
}
