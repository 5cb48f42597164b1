// Exact deduplication: every copy points at its first occurrence.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "curation/exact_dedup.h"

using namespace trident::curation;

TEST(CurationExact, FirstOccurrenceKept) {
  std::vector<HashedDoc> d = {exact_hash("a", 5), exact_hash("b", 1), exact_hash("a", 2)};
  auto k = exact_keepers(d);
  EXPECT_EQ(k, (std::vector<std::uint32_t>{2, 1, 2}));
}
