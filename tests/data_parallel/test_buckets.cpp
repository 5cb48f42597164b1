// Gradient buckets as a pure function of the tensors, and the floats sharded gradients and
// weights hold at once, against cuts and unions worked out by hand and counted float by float.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

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

// A tied output layer (the first tensor, 10 floats) in blocks of 4: buckets of their own,
// reduced on demand, the rest cut as before; together they still tile the buffer.
TEST(GradientBuckets, VocabularyBlocksAreBucketsOfTheirOwn) {
  VocabularyBlocks tied;
  tied.head_tensor = tied.sparse_tensor = 0;
  tied.block_floats = 4;
  const std::vector<Bucket> b = gradient_buckets(kTensors, 32, 8, tied);
  const std::vector<std::pair<long, long>> want = {{18, 14}, {10, 8}, {8, 2}, {4, 4}, {0, 4}};
  ASSERT_EQ(b.size(), want.size());
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b[i].offset, want[i].first) << i;
    EXPECT_EQ(b[i].floats, want[i].second) << i;
    EXPECT_EQ(b[i].on_demand, i >= 2) << i;
  }
  // Untied: the output layer is the last tensor ([22, 28), its last block takes the padding to
  // 32); the input embedding one on-demand bucket that is never reduced; the tensors between
  // are cut from the last as before ([14, 22) reaches 8, [10, 14) ends at the embedding).
  VocabularyBlocks untied;
  untied.head_tensor = 4, untied.sparse_tensor = 0, untied.block_floats = 4;
  const std::vector<Bucket> u = gradient_buckets(kTensors, 32, 8, untied);
  const std::vector<std::pair<long, long>> want_u = {{26, 6}, {22, 4}, {14, 8}, {10, 4}, {0, 10}};
  ASSERT_EQ(u.size(), want_u.size());
  for (size_t i = 0; i < u.size(); ++i) {
    EXPECT_EQ(u[i].offset, want_u[i].first) << i;
    EXPECT_EQ(u[i].floats, want_u[i].second) << i;
    EXPECT_EQ(u[i].on_demand, i < 2 || i == 4) << i;
  }
}

TEST(GradientBuckets, VocabularyUnitsTakeTheBlocksOutOfTheirUnit) {
  // Units: the embedding [word 0..10 | position 10..14), a layer [14, 22), the rest [22, 32).
  const std::vector<std::pair<long, long>> units = {{0, 14}, {14, 8}, {22, 10}};
  VocabularyBlocks tied;
  tied.head_tensor = tied.sparse_tensor = 0;
  tied.block_floats = 4;
  const std::vector<std::pair<long, long>> want = {{0, 4},  {4, 4},  {8, 2},
                                                   {10, 4}, {14, 8}, {22, 10}};
  EXPECT_EQ(vocabulary_units(units, kTensors, tied), want);
  // Untied: the input embedding in no unit; the output layer [22, 28) as blocks, the padding
  // after it a unit of its own.
  VocabularyBlocks untied;
  untied.head_tensor = 4, untied.sparse_tensor = 0, untied.block_floats = 4;
  const std::vector<std::pair<long, long>> want_u = {{10, 4}, {14, 8}, {22, 4}, {26, 2}, {28, 4}};
  EXPECT_EQ(vocabulary_units(units, kTensors, untied), want_u);
  EXPECT_EQ(vocabulary_units(units, kTensors, {}), units);
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
  // The 2 MiB pages split: the shard's edge and the buckets' at 10M and 18M (0 starts one).
  const long edges = 512L * 1024 * 3;
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

// The worst rank's floats, counted float by float over a buffer of `blocks` blocks of M floats
// (every range and shard edge on a block boundary): its shard plus the ranges of one window.
long counted_worst_rank(const std::vector<std::vector<std::pair<long, long>>>& windows, long blocks,
                        int ranks, long M) {
  long worst = 0;
  for (int r = 0; r < ranks; ++r)
    for (const auto& window : windows) {
      std::vector<bool> held(blocks, false);
      for (long k = r * blocks / ranks; k < (r + 1) * blocks / ranks; ++k) held[k] = true;
      for (auto [lo, hi] : window)
        for (long k = lo / M; k < hi / M; ++k) held[k] = true;
      worst = std::max(worst, (long)std::count(held.begin(), held.end(), true) * M);
    }
  return worst;
}

// Both sharded plans against the worst rank counted float by float, on random layouts of
// 10-million-float blocks (the 2 MiB page allowance then caps nothing but whole buffers).
TEST(GradientBuckets, ShardedPlansAreTheWorstRankCountedFloatByFloat) {
  const long M = 10'000'000, page = 512L * 1024;
  std::mt19937 random(31);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random); };
  for (int trial = 0; trial < 300; ++trial) {
    const int ranks = std::vector<int>{1, 2, 3, 4, 7, 16}[pick(0, 5)];
    std::vector<std::pair<long, long>> units;
    long blocks = 0;
    for (int u = pick(1, 12); u > 0; --u) {
      const long size = pick(1, 5);
      units.emplace_back(blocks * M, size * M);
      blocks += size;
    }
    blocks = (blocks + ranks - 1) / ranks * ranks + ranks * pick(0, 1);  // padded to d
    const long buffer = blocks * M;
    const int window = pick(1, 4);
    const bool wrap = pick(0, 1) == 1;
    SCOPED_TRACE("trial " + std::to_string(trial));
    // Weights: every `window` consecutive units, and with `wrap` the first unit with each.
    std::vector<std::vector<std::pair<long, long>>> windows;
    for (size_t i = 0; i < units.size(); ++i) {
      const size_t last = std::min(units.size(), i + window) - 1;
      windows.push_back({{units[i].first, units[last].first + units[last].second}});
      if (wrap) windows.back().push_back({units[0].first, units[0].first + units[0].second});
    }
    EXPECT_EQ(largest_sharded_weight_floats(units, buffer, ranks, window, wrap),
              std::min(buffer, counted_worst_rank(windows, blocks, ranks, M) + page * 2 * window));
    // Gradients: buckets i - in_flight .. i, and with the flag the last bucket too.
    const std::vector<Bucket> buckets = gradient_buckets(units, buffer, pick(1, 8) * M);
    const int in_flight = window - 1;
    windows.clear();
    for (size_t i = 0; i < buckets.size(); ++i) {
      const size_t first = i >= (size_t)in_flight ? i - in_flight : 0;
      windows.push_back({{buckets[i].offset, buckets[first].offset + buckets[first].floats}});
      if (wrap)
        windows.back().push_back(
            {buckets.back().offset, buckets.back().offset + buckets.back().floats});
    }
    long split_pages = 1;  // the shard's edge, and each bucket edge inside a page
    for (const Bucket& b : buckets)
      if (b.offset % page != 0) ++split_pages;
    EXPECT_EQ(largest_sharded_gradient_floats(buckets, buffer, ranks, in_flight, wrap),
              std::min(buffer, counted_worst_rank(windows, blocks, ranks, M) + page * split_pages));
  }
}

}  // namespace
}  // namespace trident::data_parallel
