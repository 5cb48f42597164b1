// A layout's name and the rules it must keep, for the data-parallel sharding strategies:
// the ZeRO stage in its description, d >= 2 to shard anything, and no sharded gradients
// under ZB-H1 (training's rule: the reduce-scatter ends each micro-batch's backward, before
// ZB-H1's deferred weight gradients).
#include <gtest/gtest.h>

#include "context_parallel/rules.h"
#include "planner/layout.h"
#include "train/training_config.h"

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
            "--data-parallel-sharding-strategy optim_grads needs d x c >= 2 to shard anything");
  Layout zb{1, 2, 2, 1, 1, Recompute::kNone, ShardingStrategy::kOptimGrads, false, true};
  errors = layout_violations(zb, w);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("--pipeline-schedule zb-h1 computes weight gradients after later"),
            std::string::npos)
      << errors[0];
  zb.sharding = ShardingStrategy::kOptim;  // ZeRO-1 reduces once, after every W: allowed
  EXPECT_TRUE(layout_violations(zb, w).empty());
}

// Context parallelism: c in the name and the device count, and training's own rules (the
// same function, so the same words): the sequence in 2c chunks, a2a's heads per tensor rank,
// MoE refused; the distributed optimizer shards over d x c.
TEST(PlannerLayout, ContextParallelismCountsItsRanksAndKeepsTrainingsRules) {
  Workload w = small_gpt();  // seq 64, 4 heads
  Layout l{2, 1, 2, 1, 1, Recompute::kNone};
  l.context = 2;
  EXPECT_EQ(l.describe(), "t=2 c=2 p=1 d=2 b=1 v=1");
  EXPECT_EQ(l.devices(), 8);
  EXPECT_EQ(l.replicas(), 4);
  EXPECT_TRUE(layout_violations(l, w).empty());
  l.cp_comm_type = context_parallel::CpCommType::kA2a;
  EXPECT_EQ(l.describe(), "t=2 c=2 cp=a2a p=1 d=2 b=1 v=1");
  EXPECT_TRUE(layout_violations(l, w).empty());  // 2 heads per tensor rank over c = 2
  l.context = 4;                                 // 2 heads per tensor rank do not split over 4
  auto training_says = [&](const Layout& x, const Workload& wl) {
    train::TrainingConfig c;
    c.model = wl.model;
    c.tensor_model_parallel_size = x.tensor, c.context_parallel_size = x.context;
    c.world_size = (int)x.devices();
    c.cp_comm_type = context_parallel::cp_comm_type_name(x.cp_comm_type);
    std::vector<std::string> all = train::validate_training_config(c), cp;
    for (const std::string& e : all)
      if (e.find("--cp-comm-type") != std::string::npos ||
          e.find("--context-parallel-size") != std::string::npos)
        cp.push_back(e);
    return cp;
  };
  std::vector<std::string> errors = layout_violations(l, w);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("--cp-comm-type a2a needs the attention heads (2)"), std::string::npos)
      << errors[0];
  EXPECT_EQ(errors, training_says(l, w));
  w.model.seq_length = 60;  // not divisible by 2 x 4
  l.cp_comm_type = context_parallel::CpCommType::kP2p;
  errors = layout_violations(l, w);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0],
            "--seq-length (60) must be divisible by 2 x --context-parallel-size (2 x 4): each "
            "sequence is split into 2c equal chunks");
  EXPECT_EQ(errors, training_says(l, w));
  w = small_gpt();
  w.model.moe.num_experts = 4;
  l.sequence_parallel = true;  // MoE's own rule at t = 2
  errors = layout_violations(l, w);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("mixture-of-experts models (--num-experts) are not built with context"),
            std::string::npos);
  // ZeRO over the d x c replicas: d = 1, c = 2 shards over two ranks.
  Layout one{1, 1, 1, 1, 1, Recompute::kNone, ShardingStrategy::kOptim};
  one.context = 2;
  EXPECT_TRUE(layout_violations(one, small_gpt()).empty());
}

}  // namespace
}  // namespace trident::planner
