// planned_rank_memory against the plans build_rank_model prints once it has allocated the
// rank (every rank of a layout built in turn with stand-in communicators), buffer by buffer,
// and against Megatron's bytes per parameter worked by hand: fp32 weights and gradients 8,
// Adam's two moments 8, or 8/d with the distributed optimizer (ZeRO-1).
#include <gtest/gtest.h>

#include "comm/placed_communicator.h"
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
        dp(0, o.layout.data);
    const RankModel built = build_rank_model(o, tp, pp, dp);
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
