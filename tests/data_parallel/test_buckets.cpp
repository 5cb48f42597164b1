// Gradient buckets as a pure function of the tensors, and the floats sharded gradients hold at
// once, against cuts and unions worked out by hand.
#include <gtest/gtest.h>

#include "data_parallel/buckets.h"

namespace trident::data_parallel {
namespace {

// Five tensors of 10, 4, 4, 4, 6 floats at offsets 0, 10, 14, 18, 22; the buffer is padded
// to 32 floats.
const std::vector<std::pair<long, long>> kTensors = {{0, 10}, {10, 4}, {14, 4}, {18, 4}, {22, 6}};

TEST(GradientBuckets, CutFromTheLastTensorWithThePaddingInTheFirstBucket) {
  // From the last: 6 (< 8) + 4 = 10 >= 8 closes [18, 32); 4 + 4 = 8 closes [10, 18); the
  // first tensor closes [0, 10).
  const std::vector<Bucket> b = gradient_buckets(kTensors, 32, 8);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].offset, 18);
  EXPECT_EQ(b[0].floats, 14);
  EXPECT_EQ(b[0].spec_begin, 3);
  EXPECT_EQ(b[0].spec_end, 5);
  EXPECT_EQ(b[1].offset, 10);
  EXPECT_EQ(b[1].floats, 8);
  EXPECT_EQ(b[2].offset, 0);
  EXPECT_EQ(b[2].floats, 10);
  EXPECT_EQ(b[2].spec_begin, 0);
  EXPECT_EQ(b[2].spec_end, 1);
  EXPECT_EQ(gradient_buckets(kTensors, 32, 1000).size(), 1u);  // one bucket of everything
}

TEST(GradientBuckets, LargestWindow) {
  const std::vector<Bucket> b = gradient_buckets(kTensors, 32, 8);  // 14, 8, 10
  EXPECT_EQ(largest_bucket_window(b, 0), 14);
  EXPECT_EQ(largest_bucket_window(b, 1), 22);  // 14 + 8
  EXPECT_EQ(largest_bucket_window(b, 2), 32);
}

TEST(GradientBuckets, ShardedHoldsTheShardAndTheWindowOnTheWorstRank) {
  // Buckets [18, 32), [10, 18), [0, 10); d = 2 shards [0, 16) and [16, 32).
  const std::vector<Bucket> b = gradient_buckets(kTensors, 32, 8);
  EXPECT_EQ(largest_sharded_gradient_floats(b, 32, 2, 0, false), 32);  // 2 MiB edges: capped
  // Without the page allowance (a buffer of many pages): with 10-million-float scale.
  const long M = 10'000'000;
  std::vector<std::pair<long, long>> big;
  for (auto [offset, floats] : kTensors) big.emplace_back(offset * M, floats * M);
  const std::vector<Bucket> bb = gradient_buckets(big, 32 * M, 8 * M);
  const long edges = 512L * 1024 * 4;
  // No window beyond the bucket being filled: rank 0 [0, 16M) with bucket [18M, 32M) -> 30M;
  // rank 1 [16M, 32M) with [0, 10M) -> 26M.
  EXPECT_EQ(largest_sharded_gradient_floats(bb, 32 * M, 2, 0, false), 30 * M + edges);
  // One in flight: rank 0 with [10M, 32M) -> [0, 32M) = 32M: everything (capped).
  EXPECT_EQ(largest_sharded_gradient_floats(bb, 32 * M, 2, 1, false), 32 * M);
  // d = 4, shards of 8M; no window: rank 1 [8M, 16M) with [18M, 32M) -> 22M; with the
  // embedding bucket [0, 10M) held too: [0, 16M) + [18M, 32M) -> 30M.
  EXPECT_EQ(largest_sharded_gradient_floats(bb, 32 * M, 4, 0, false), 22 * M + edges);
  EXPECT_EQ(largest_sharded_gradient_floats(bb, 32 * M, 4, 0, true), 30 * M + edges);
}

TEST(ShardCounts, EachRanksPartOfARange) {
  // A buffer of 32 over 4 ranks: shards [0, 8), [8, 16), [16, 24), [24, 32).
  EXPECT_EQ(shard_counts(6, 19, 32, 4), (std::vector<long>{2, 8, 3, 0}));
  EXPECT_EQ(shard_counts(24, 32, 32, 4), (std::vector<long>{0, 0, 0, 8}));
  EXPECT_EQ(shard_counts(3, 3, 32, 4), (std::vector<long>{0, 0, 0, 0}));
}

TEST(ShardedWeights, TheShardAndTheUnitsAPassHoldsOnTheWorstRank) {
  // Units (in 10-million floats): embedding [0, 10), layers [10, 16), [16, 22), [22, 28), the
  // final norm [28, 32); d = 2 shards [0, 16M) and [16M, 32M).
  const long M = 10'000'000, edges = 512L * 1024 * 2 * 2;
  const std::vector<std::pair<long, long>> units = {
      {0, 10 * M}, {10 * M, 6 * M}, {16 * M, 6 * M}, {22 * M, 6 * M}, {28 * M, 4 * M}};
  // Two at a time: rank 1 with [0, 16M) (the embedding and layer 0) holds everything.
  EXPECT_EQ(largest_sharded_weight_floats(units, 32 * M, 2, 2, false), 32 * M);
  // d = 4 (shards of 8M): rank 0 [0, 8M) with [16M, 28M) -> 20M; rank 3 [24M, 32M) with
  // [0, 16M) -> 24M, the most.
  EXPECT_EQ(largest_sharded_weight_floats(units, 32 * M, 4, 2, false), 24 * M + edges);
  // A tied embedding stays with every window: rank 3 with [0, 10M) + [16M, 28M) -> 30M.
  EXPECT_EQ(largest_sharded_weight_floats(units, 32 * M, 4, 2, true), 30 * M + edges);
  // The units whole, shard or not: [0, 16M) two at a time; tied: [0, 10M) + [16M, 28M).
  EXPECT_EQ(largest_unit_window(units, 2, false), 16 * M);
  EXPECT_EQ(largest_unit_window(units, 2, true), 22 * M);
}

}  // namespace
}  // namespace trident::data_parallel
