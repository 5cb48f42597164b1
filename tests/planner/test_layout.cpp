// A layout's name and the rules it must keep, for the data-parallel sharding strategies:
// the ZeRO stage in its description, d >= 2 to shard anything, and no sharded gradients
// under ZB-H1 (training's rule: the reduce-scatter ends each micro-batch's backward, before
// ZB-H1's deferred weight gradients).
#include <gtest/gtest.h>

#include "planner/layout.h"

namespace trident::planner {
namespace {

using data_parallel::ShardingStrategy;

Workload small_gpt() {
  Workload w;
  w.model.num_layers = 4, w.model.hidden_size = 128, w.model.num_attention_heads = 4;
  w.model.seq_length = 64, w.model.vocab_size = 1000;
  w.global_batch = 16;
  return w;
}

TEST(PlannerLayout, DescribeNamesTheZeroStage) {
  Layout l{1, 2, 4, 1, 1, Recompute::kNone};
  EXPECT_EQ(l.describe(), "t=1 p=2 d=4 b=1 v=1");
  const std::pair<ShardingStrategy, const char*> stages[] = {
      {ShardingStrategy::kOptim, "zero-1"},
      {ShardingStrategy::kOptimGrads, "zero-2"},
      {ShardingStrategy::kOptimGradsParams, "zero-3"}};
  for (auto [strategy, name] : stages) {
    l.sharding = strategy;
    EXPECT_EQ(l.describe(), std::string("t=1 p=2 d=4 b=1 v=1 ") + name);
    EXPECT_TRUE(l.distributed_optimizer());
  }
  l.sharding = ShardingStrategy::kNoShard;
  EXPECT_FALSE(l.distributed_optimizer());
}

TEST(PlannerLayout, ShardingNeedsReplicasAndNoDeferredWeightGradients) {
  const Workload w = small_gpt();
  Layout one{1, 1, 1, 1, 1, Recompute::kNone, ShardingStrategy::kOptimGrads};
  std::vector<std::string> errors = layout_violations(one, w);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0],
            "--data-parallel-sharding-strategy optim_grads needs d >= 2 to shard anything");
  Layout zb{1, 2, 2, 1, 1, Recompute::kNone, ShardingStrategy::kOptimGrads, false, true};
  errors = layout_violations(zb, w);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("--pipeline-schedule zb-h1 computes weight gradients after later"),
            std::string::npos)
      << errors[0];
  zb.sharding = ShardingStrategy::kOptim;  // ZeRO-1 reduces once, after every W: allowed
  EXPECT_TRUE(layout_violations(zb, w).empty());
}

}  // namespace
}  // namespace trident::planner
