// The four data-parallel sharding strategies in the planner, against the ZeRO paper's
// (Rajbhandari et al. 2020) accounting written out here: the bytes each rank sends per
// iteration, ZeRO-3's 1.5x of plain data parallelism, the memory order of the stages on a
// gpt2-small-shaped model, and the collectives' exposed time worked by hand.
#include <gtest/gtest.h>

#include "planner/iteration_model.h"
#include "planner/sharding.h"

namespace trident::planner {
namespace {

using data_parallel::ShardingStrategy;

Cluster one_node(int devices) {
  Cluster c;
  c.nodes = 1;
  c.device = {"X", 100, 80, 1000};
  c.devices_per_node = devices;
  c.intra_node = {100, 5};
  c.inter_node = {10, 10};
  return c;
}

// GPT-2 small: 12 layers, h = 768, 12 heads, 1024 positions, the GPT-2 vocabulary (padded to
// 50,304), tied output layer.
Workload gpt2_small(long global_batch) {
  Workload w;
  w.model.num_layers = 12, w.model.hidden_size = 768, w.model.num_attention_heads = 12;
  w.model.seq_length = 1024, w.model.vocab_size = 50257;
  w.global_batch = global_batch;
  w.precision = kernels::Precision::kBf16;
  return w;
}

// GPT-2's parameters, counted by hand: a layer has two LayerNorms (2h each), QKV (3h^2 + 3h),
// the attention projection (h^2 + h) and the MLP (4h^2 + 4h, 4h^2 + h): 12h^2 + 13h. With the
// word and position embeddings and the final LayerNorm.
constexpr double kH = 768, kPaddedVocab = 50304, kPositions = 1024;
constexpr double kLayer = 12 * kH * kH + 13 * kH;
constexpr double kEmbedding = kPaddedVocab * kH + kPositions * kH;
constexpr double kPsi = kEmbedding + 12 * kLayer + 2 * kH;

Layout layout(int d, int b, ShardingStrategy s) {
  Layout l{1, 1, d, b, 1, Recompute::kNone, s};
  return l;
}

TEST(PlannerSharding, StageParametersAreGpt2sCount) {
  IterationModel model(one_node(4), gpt2_small(4));
  const StageParameters p = model.stage_parameters(layout(4, 1, ShardingStrategy::kNoShard), 0);
  EXPECT_DOUBLE_EQ(p.floats, kPsi);
  EXPECT_DOUBLE_EQ(gathered_working_set_floats(p.units), kEmbedding + kLayer);
}

// Every parameter of a stage is in exactly one gathered unit, whatever the pipeline split.
TEST(PlannerSharding, UnitsCoverTheStagesParametersOnce) {
  for (bool tied : {true, false}) {
    Workload w = gpt2_small(8);
    w.model.untie_embeddings_and_output_weights = !tied;
    IterationModel model(one_node(8), w);
    for (auto [p, v] : {std::pair{1, 1}, {2, 1}, {2, 3}, {4, 1}}) {
      Layout l = layout(2, 1, ShardingStrategy::kOptimGradsParams);
      l.pipeline = p, l.virtual_stages = v;
      for (int stage = 0; stage < p; ++stage) {
        const StageParameters s = model.stage_parameters(l, stage);
        double sum = 0;
        for (double unit : s.units) sum += unit;
        EXPECT_DOUBLE_EQ(sum, s.floats) << l.describe() << " stage " << stage;
        EXPECT_GE(s.units.size(), (size_t)(12 / p));
      }
    }
  }
}

// Per iteration on a ring of d ranks, each rank sends (d - 1) / d of every reduce-scatter's or
// all-gather's buffer (an all-reduce is one of each); the buffer is Psi fp32 floats.
TEST(PlannerSharding, DataParallelBytesPerIterationAreZerosAccounting) {
  const int d = 4;
  const double ring = (d - 1.0) / d * kPsi * 4;
  for (int m : {1, 2, 4}) {
    IterationModel model(one_node(d), gpt2_small((long)m * d));
    auto bytes = [&](ShardingStrategy s) {
      return model.predict(layout(d, 1, s)).data_parallel_bytes;
    };
    SCOPED_TRACE("m = " + std::to_string(m));
    // Plain data parallelism and ZeRO-1: one all-reduce (reduce-scatter + all-gather) per step.
    EXPECT_NEAR(bytes(ShardingStrategy::kNoShard), 2 * ring, 1e-9 * ring);
    EXPECT_NEAR(bytes(ShardingStrategy::kOptim), 2 * ring, 1e-9 * ring);
    // ZeRO-2: a reduce-scatter after each micro-batch's backward, one all-gather of the values.
    EXPECT_NEAR(bytes(ShardingStrategy::kOptimGrads), m * ring + ring, 1e-9 * ring);
    // ZeRO-3: per micro-batch, the weights gathered for forward and for backward, and the
    // gradients reduce-scattered.
    EXPECT_NEAR(bytes(ShardingStrategy::kOptimGradsParams), 3 * m * ring, 1e-9 * ring);
  }
}

// The ZeRO paper, section 7.2.2: ZeRO-3 "incurs a total communication volume of 3 Psi, compared
// to 2 Psi" of standard data parallelism: 1.5x, at one micro-batch per step.
TEST(PlannerSharding, ZeroThreeMovesOneAndAHalfTimesPlainDataParallelism) {
  for (int d : {2, 4, 8}) {
    IterationModel model(one_node(d), gpt2_small(d));
    const double plain =
        model.predict(layout(d, 1, ShardingStrategy::kNoShard)).data_parallel_bytes;
    const double zero3 =
        model.predict(layout(d, 1, ShardingStrategy::kOptimGradsParams)).data_parallel_bytes;
    EXPECT_NEAR(zero3 / plain, 1.5, 1e-12) << "d = " << d;
  }
}

TEST(PlannerSharding, OneReplicaSendsNothing) {
  IterationModel model(one_node(4), gpt2_small(4));
  const Prediction p = model.predict(layout(1, 1, ShardingStrategy::kNoShard));
  EXPECT_EQ(p.data_parallel_bytes, 0);
  EXPECT_EQ(p.time.data_comm + p.time.data_comm_hidden, 0);
}

// gpt2-small at d = 4 in bf16: each stage holds less, and by ZeRO's amounts.
TEST(PlannerSharding, MemoryFallsStageByStageOnGpt2Small) {
  const int d = 4;
  IterationModel model(one_node(d), gpt2_small(4 * d));
  auto memory = [&](ShardingStrategy s) { return model.device_memory(layout(d, 1, s)); };
  const MemoryBreakdown none = memory(ShardingStrategy::kNoShard),
                        zero1 = memory(ShardingStrategy::kOptim),
                        zero2 = memory(ShardingStrategy::kOptimGrads),
                        zero3 = memory(ShardingStrategy::kOptimGradsParams);
  EXPECT_GT(none.total(), zero1.total());
  EXPECT_GT(zero1.total(), zero2.total());
  EXPECT_GT(zero2.total(), zero3.total());
  const double tolerance = 64 * 4 * 2;  // the buffers are padded to a multiple of 16 d floats
  // ZeRO-1: Adam's two fp32 moments (8 bytes per parameter) sharded.
  EXPECT_NEAR(none.optimizer, 8 * kPsi, tolerance);
  EXPECT_NEAR(zero1.optimizer, 8 * kPsi / d, tolerance);
  // ZeRO-2: fp32 gradients from 4 Psi bytes to the shard and the window of buckets being
  // filled and reduced (its size is the engine's plan, tested in tests/engine).
  EXPECT_NEAR(none.gradients, 4 * kPsi, tolerance);
  EXPECT_GE(zero2.gradients, 4 * kPsi / d);
  EXPECT_LT(zero2.gradients, none.gradients);
  // ZeRO-3: fp32 weights and their bf16 copy (6 bytes per parameter) sharded, plus both formats
  // of the two largest units gathered (the word and position embeddings, and one layer).
  EXPECT_NEAR(zero2.weights, 6 * kPsi, tolerance);
  EXPECT_NEAR(zero3.weights, 6 * kPsi / d + 6 * (kEmbedding + kLayer), tolerance);
  EXPECT_EQ(zero3.gradients, zero2.gradients);
  EXPECT_EQ(zero3.activations, none.activations);
}

// The exposed time, worked by hand: Psi = 100M floats (400 MB) over d = 4 at 1 GB/s with no
// latency, so a reduce-scatter or all-gather takes 0.75 x 0.4 s = 0.3 s and an all-reduce
// 0.6 s; 10M-float buckets; a micro-batch's forward 0.1 s, its backward 0.2 s; m = 2.
TEST(PlannerSharding, ExposedTimeWorkedByHand) {
  const LinkSpec link{1, 0};
  DataParallelWork w;
  w.data = 4, w.microbatches = 2;
  w.parameter_floats = 100e6, w.bucket_floats = 10e6, w.unit_floats = 40e6;
  w.forward = 0.1, w.backward = 0.2;
  auto traffic = [&](ShardingStrategy s) { return data_parallel_traffic(s, w, link); };
  // No sharding: the all-reduce under the last backward: 0.6 - 0.2.
  EXPECT_NEAR(traffic(ShardingStrategy::kNoShard).seconds, 0.6, 1e-12);
  EXPECT_NEAR(traffic(ShardingStrategy::kNoShard).exposed, 0.4, 1e-12);
  // ZeRO-1: under the last backward and the next forward: 0.6 - 0.3.
  EXPECT_NEAR(traffic(ShardingStrategy::kOptim).exposed, 0.3, 1e-12);
  // ZeRO-2: each micro-batch's reduce-scatter under its backward, 2 x (0.3 - 0.2); the
  // all-gather under the next forward, 0.3 - 0.1.
  EXPECT_NEAR(traffic(ShardingStrategy::kOptimGrads).seconds, 0.9, 1e-12);
  EXPECT_NEAR(traffic(ShardingStrategy::kOptimGrads).exposed, 0.4, 1e-12);
  // ZeRO-3: per micro-batch the forward's gather less the forward (0.2), the backward's
  // gather and reduce-scatter less the backward (0.4).
  EXPECT_NEAR(traffic(ShardingStrategy::kOptimGradsParams).seconds, 1.8, 1e-12);
  EXPECT_NEAR(traffic(ShardingStrategy::kOptimGradsParams).exposed, 1.2, 1e-12);
  // Ample compute: only the last bucket of each reduction (10% of 0.3 s), and ZeRO-3's first
  // unit (40% of the 0.3 s gather), wait.
  w.forward = w.backward = 10;
  EXPECT_NEAR(traffic(ShardingStrategy::kNoShard).exposed, 0.06, 1e-12);
  EXPECT_NEAR(traffic(ShardingStrategy::kOptimGrads).exposed, 2 * 0.03, 1e-12);
  EXPECT_NEAR(traffic(ShardingStrategy::kOptimGradsParams).exposed, 2 * (0.12 + 0.03), 1e-12);
}

// Sharded gradients reduce after every micro-batch, so ZeRO-2's time for the data-parallel
// collectives grows with m while ZeRO-1's does not.
TEST(PlannerSharding, ZeroTwoPaysItsReductionsPerMicroBatch) {
  const int d = 4;
  IterationModel model(one_node(d), gpt2_small(8 * d));
  auto dp_seconds = [&](ShardingStrategy s, int b) {
    const Prediction p = model.predict(layout(d, b, s));
    return p.time.data_comm + p.time.data_comm_hidden;
  };
  // m = 8 against m = 1 (b = 8).
  EXPECT_NEAR(dp_seconds(ShardingStrategy::kOptim, 1), dp_seconds(ShardingStrategy::kOptim, 8),
              1e-12);
  const double one = dp_seconds(ShardingStrategy::kOptimGrads, 8);
  const double eight = dp_seconds(ShardingStrategy::kOptimGrads, 1);
  EXPECT_NEAR(eight / one, (8 + 1) / 2.0, 1e-9);  // (m + 1) collectives of the same time
}

}  // namespace
}  // namespace trident::planner
