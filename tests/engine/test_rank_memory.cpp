// planned_rank_memory against the plans build_rank_model prints once it has allocated the
// rank (every rank of a layout built in turn with stand-in communicators), buffer by buffer,
// and against Megatron's bytes per parameter worked by hand: fp32 weights and gradients 8,
// Adam's two moments 8, or 8/d with the distributed optimizer (ZeRO-1).
#include <gtest/gtest.h>

#include <tuple>

#include "comm/placed_communicator.h"
#include "data_parallel/sharding_strategy.h"
#include "engine/rank_memory.h"
#include "engine/rank_plans.h"

namespace trident::engine {
namespace {

namespace pp = pipeline_parallel;

ModelConfig small_model() {
  ModelConfig m;
  m.num_layers = 4, m.hidden_size = 64, m.num_attention_heads = 4, m.seq_length = 32;
  m.vocab_size = 500;
  return m;
}

// p pipeline ranks, d data ranks, 1F1B over m micro-batches of 2 (and m / 2 first, as a
// ramp-up would).
RankModelOptions options(int p, int d, int m) {
  RankModelOptions o;
  o.layout.model = small_model();
  o.layout.pipeline = p, o.layout.data = d, o.layout.micro_batch = 2;
  o.layout.split = RankLayout::even_split(o.layout.model.num_layers, p);
  o.schedule = {pp::ScheduleKind::kOneFOneB, p, 1, m};
  o.schedules = {{pp::ScheduleKind::kOneFOneB, p, 1, std::max(1, m / 2)}, o.schedule};
  return o;
}

void expect_plan_of_built_rank(const RankModelOptions& o) {
  for (int stage = 0; stage < o.layout.pipeline; ++stage) {
    testing::PlacedCommunicator tp(0, o.layout.tensor), pp(stage, o.layout.pipeline),
        dp(0, o.layout.data), expert(0, o.layout.expert_parallel),
        expert_data(0, o.layout.data / o.layout.expert_parallel);
    const RankModel built = build_rank_model(o, tp, pp, dp, nullptr, &expert, &expert_data);
    const std::vector<const MemoryPlan*> printed = testing::printed_plans(built);
    const RankMemoryPlan planned = planned_rank_memory(o, stage);
    std::vector<const MemoryPlan*> planned_pointers;
    for (const MemoryPlan& plan : planned.chunks) planned_pointers.push_back(&plan);
    planned_pointers.push_back(&planned.buffers);
    EXPECT_EQ(testing::plan_entries(planned_pointers), testing::plan_entries(printed))
        << "stage " << stage;
    EXPECT_EQ(planned.total_bytes(), built.planned_bytes()) << "stage " << stage;
  }
}

TEST(PlannedRankMemory, IsWhatBuildRankModelAllocates) {
  expect_plan_of_built_rank(options(1, 1, 4));
  expect_plan_of_built_rank(options(2, 1, 4));
  RankModelOptions o = options(2, 2, 4);  // sharded moments, MPI temporaries
  o.layout.distributed_optimizer = o.reduce.distributed_optimizer = true;
  o.reduce.overlap = true;
  expect_plan_of_built_rank(o);
  o = options(2, 1, 4);  // uneven stages, bf16, recomputation, zero-bubble
  o.layout.split = {3, 1};
  o.layout.precision = kernels::Precision::kBf16;
  o.layout.recompute_granularity = "full", o.layout.recompute_method = "block";
  o.layout.recompute_num_layers = 2;
  for (pp::ScheduleConfig* s : {&o.schedule, &o.schedules[0], &o.schedules[1]})
    s->kind = pp::ScheduleKind::kZeroBubbleH1;
  expect_plan_of_built_rank(o);
  o.async_save = true;  // the checkpoint snapshot
  expect_plan_of_built_rank(o);
}

// An MoE model at EP 2 and d 4 (a 2-rank expert-data group) under ZeRO-2 and ZeRO-3, with
// gradient buckets small enough that the expert buffer has several.
RankModelOptions moe_options(data_parallel::ShardingStrategy strategy) {
  RankModelOptions o = options(1, 4, 2);
  o.layout.model.moe.num_experts = 4, o.layout.model.moe.ffn_hidden_size = 40;
  o.layout.model.moe.layer_pattern = {true, false, true, true};
  o.layout.expert_parallel = 2;
  o.layout.distributed_optimizer = o.reduce.distributed_optimizer = true;
  o.layout.shard_gradients = o.reduce.shard_gradients = data_parallel::shards_gradients(strategy);
  o.layout.shard_parameters = data_parallel::shards_parameters(strategy);
  o.layout.ddp_bucket_size = o.reduce.bucket_floats = 3000;
  o.reduce.overlap = true;
  return o;
}

TEST(PlannedRankMemory, IsWhatBuildRankModelAllocatesWithShardedExperts) {
  for (auto s : {data_parallel::ShardingStrategy::kOptimGrads,
                 data_parallel::ShardingStrategy::kOptimGradsParams}) {
    expect_plan_of_built_rank(moe_options(s));
    RankModelOptions o = moe_options(s);
    o.layout.precision = kernels::Precision::kBf16;
    expect_plan_of_built_rank(o);
  }
}

// The expert rows of the plan under ZeRO-2/3, worked by hand: experts whose fc1 and fc2 are
// one 2 MiB page each (GeLU, h 512, F 1024: 2^19 floats), buckets of one page, E = 8 at EP 2,
// every layer MoE. Each rank keeps its shard of the expert gradients (the buffer over the
// expert-data group d / EP) and, outside it, the bucket being filled and those in reduction
// (two under ZeRO-2, one under ZeRO-3), plus the page at its shard's edge; under ZeRO-3 its
// shard of the expert weights and two MoE layers' experts (the one running and the next),
// plus the two pages at each unit's edges.
TEST(PlannedRankMemory, ExpertRowsShrinkUnderZeroTwoAndThree) {
  const long page = 512L * 1024;
  for (auto [strategy, d, layers] : {std::tuple{data_parallel::ShardingStrategy::kOptimGrads, 4, 2},
                                     {data_parallel::ShardingStrategy::kOptimGradsParams, 8, 4}}) {
    RankModelOptions o = moe_options(strategy);
    ModelConfig& m = o.layout.model;
    m.num_layers = layers, m.hidden_size = 512, m.num_attention_heads = 8;
    m.moe.num_experts = 8, m.moe.ffn_hidden_size = 1024, m.moe.layer_pattern = {};
    o.layout.data = d;
    o.layout.split = RankLayout::even_split(layers, 1);
    o.layout.ddp_bucket_size = o.reduce.bucket_floats = page;
    const int edp = d / 2;
    const long experts = (long)layers * (8 / 2) * 2 * page;  // 4 local experts, fc1 + fc2
    const MemoryPlan plan = planned_rank_memory(o, 0).chunks[0];
    auto row = [&](const std::string& name) {
      for (const PlannedBuffer& b : plan.buffers())
        if (b.name == name) return b.floats;
      return -1L;
    };
    const bool zero3 = data_parallel::shards_parameters(strategy);
    const int in_flight = zero3 ? 1 : 2;
    EXPECT_EQ(row("expert gradients"), experts / edp + (in_flight + 1) * page + page) << d;
    EXPECT_EQ(row("expert adam exp_avg + exp_avg_sq"), 2 * experts / edp) << d;
    const std::string weights =
        "expert weights (4 experts x " + std::to_string(layers) + " MoE layers)";
    const long layer_experts = 4 * 2 * page;
    EXPECT_EQ(row(weights), zero3 ? experts / edp + 2 * layer_experts + 4 * page : experts) << d;
    EXPECT_LT(row("expert gradients"), experts);
  }
}

// The model's parameters, as Megatron counts them: embedding (V padded to 512) and
// positions, 12 h^2 + 13 h per layer, the final LayerNorm; tied output layer.
long parameters_by_hand() {
  const long h = 64, v = 512, s = 32, layers = 4;
  return v * h + s * h + layers * (12 * h * h + 13 * h) + 2 * h;
}

long padded(long floats, long multiple) {
  return (floats + multiple - 1) / multiple * multiple;
}

TEST(PlannedRankMemory, SixteenBytesPerParameterOrEightPlusEightOverD) {
  const long n = parameters_by_hand();
  RankMemoryPlan plan = planned_rank_memory(options(1, 1, 1), 0);
  EXPECT_EQ(plan.group_bytes("parameters"), 8 * padded(n, 16));  // fp32 values + gradients
  EXPECT_EQ(plan.group_bytes("optimizer"), 8 * padded(n, 16));   // exp_avg + exp_avg_sq
  RankModelOptions o = options(1, 4, 1);
  o.layout.distributed_optimizer = o.reduce.distributed_optimizer = true;
  plan = planned_rank_memory(o, 0);
  EXPECT_EQ(plan.group_bytes("parameters"), 8 * padded(n, 64));  // padded to 16 d
  EXPECT_EQ(plan.group_bytes("optimizer"), 8 * padded(n, 64) / 4);
  EXPECT_EQ(plan.group_bytes("checkpoint"), 0);
  // --async-save: a copy of the rank's shard of the weights and of both moments (every rank
  // writes its shard): 12 bytes per parameter over d; unsharded, of the whole buffer.
  o.async_save = true;
  EXPECT_EQ(planned_rank_memory(o, 0).group_bytes("checkpoint"), 12 * padded(n, 64) / 4);
  RankModelOptions whole = options(1, 1, 1);
  whole.async_save = true;
  EXPECT_EQ(planned_rank_memory(whole, 0).group_bytes("checkpoint"), 12 * padded(n, 16));
}

TEST(PlannedRankMemory, FullestStageIsTheOneWithTheEmbeddingAndMostLayers) {
  RankModelOptions o = options(2, 1, 4);
  o.layout.split = {1, 3};  // the last stage holds 3 layers and the tied output layer
  FullestStage fullest = fullest_stage(o);
  EXPECT_EQ(fullest.stage, 1);
  EXPECT_EQ(fullest.plan.total_bytes(), planned_rank_memory(o, 1).total_bytes());
  EXPECT_GT(fullest.plan.total_bytes(), planned_rank_memory(o, 0).total_bytes());
  o.layout.split = {3, 1};
  EXPECT_EQ(fullest_stage(o).stage, 0);
}

}  // namespace
}  // namespace trident::engine
