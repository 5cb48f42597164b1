// The data-parallel bucket layout and the distributed optimizer's shards: every parameter
// in exactly one bucket, buckets in reverse order of use, shards that tile the padded
// buffer exactly for any d (no per-tensor divisibility rule).
#include <gtest/gtest.h>

#include "comm/placed_communicator.h"
#include "data_parallel/grad_reducer.h"

namespace trident::data_parallel {
namespace {

ModelConfig odd_model() {
  ModelConfig c;
  c.num_layers = 3, c.hidden_size = 24, c.num_attention_heads = 3, c.seq_length = 7;
  c.vocab_size = 101;  // no tensor is a multiple of 3, 5 or 7
  return c;
}

TEST(GradientReducer, BucketsCoverEveryParameterOnceInReverseOrder) {
  Parameters params(ParameterLayout(odd_model(), {0, 1}));
  testing::PlacedCommunicator group(0, 3);
  GradientReducer r(params, group, {5000, true, false});
  const auto& specs = params.layout().specs();
  std::vector<int> covered(specs.size(), 0);
  long previous_offset = params.size() + 1;
  for (const Bucket& b : r.buckets()) {
    EXPECT_LT(b.offset, previous_offset);  // later buckets sit earlier in the buffer
    previous_offset = b.offset;
    for (int k = b.spec_begin; k < b.spec_end; ++k) {
      ++covered[k];
      EXPECT_GE(specs[k].offset, b.offset);
      EXPECT_LE(specs[k].offset + specs[k].numel(), b.offset + b.floats);
    }
  }
  for (int n : covered) EXPECT_EQ(n, 1);
  EXPECT_GT(r.buckets().size(), 2u);
}

TEST(GradientReducer, DistributedOptimizerShardsTileThePaddedBuffer) {
  for (int d : {2, 3, 5, 7}) {
    long total = -1, next = 0;
    for (int rank = 0; rank < d; ++rank) {
      Parameters params(ParameterLayout(odd_model(), {0, 1}));
      const long unpadded = params.size();
      testing::PlacedCommunicator group(rank, d);
      GradientReducer r(params, group, {0, false, true});
      if (total < 0) total = params.size();
      EXPECT_EQ(params.size(), total);
      EXPECT_EQ(total % d, 0);
      EXPECT_GE(total, unpadded);
      EXPECT_EQ(r.shard_begin(), next) << "d=" << d;
      next = r.shard_end();
    }
    EXPECT_EQ(next, total) << "d=" << d;
  }
}

}  // namespace
}  // namespace trident::data_parallel
