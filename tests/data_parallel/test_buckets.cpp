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

}  // namespace
}  // namespace trident::data_parallel
