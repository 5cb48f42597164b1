// The four data-parallel sharding strategies in the planner, against the ZeRO paper's
// (Rajbhandari et al. 2020) accounting written out here: the bytes each rank sends per
// iteration (ZeRO-3's per unit, as training gathers them), ZeRO-3's 1.5x of plain data
// parallelism, the memory order of the stages on a gpt2-small-shaped model, ZeRO-3's memory
// as training's own plan (engine::planned_rank_memory) and by hand, and the collectives'
// exposed time worked by hand.
#include <gtest/gtest.h>

#include "engine/rank_memory.h"
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

// GPT-2's output layer when untied: the padded vocabulary x h, no bias.
constexpr double kOutput = kPaddedVocab * kH;

TEST(PlannerSharding, StageParametersAreGpt2sCount) {
  IterationModel model(one_node(4), gpt2_small(4));
  const StageParameters p = model.stage_parameters(layout(4, 1, ShardingStrategy::kNoShard), 0);
  EXPECT_DOUBLE_EQ(p.floats, kPsi);
}

// What ZeRO-3 gathers per micro-batch on one pipeline stage, and the unit each pass waits for.
struct Gathers {
  double forward, backward, forward_waited, backward_waited;
};

void expect_gathers(const StageParameters& got, const Gathers& want, const std::string& where) {
  EXPECT_DOUBLE_EQ(got.gathers.forward, want.forward) << where;
  EXPECT_DOUBLE_EQ(got.gathers.backward, want.backward) << where;
  EXPECT_DOUBLE_EQ(got.gathers.forward_waited, want.forward_waited) << where;
  EXPECT_DOUBLE_EQ(got.gathers.backward_waited, want.backward_waited) << where;
}

// Training's passes (GPTModel::forward_chunk, backward; data_parallel/param_gatherer.h):
// forward gathers each unit once — the embedding (kept for a tied output layer), each layer,
// the final norm (with an untied output layer) and on a later stage a tied word embedding's
// copy last; backward the final norm unit and the layers, never the embedding nor the copy.
// The units by hand: E the word and position embeddings, L a layer, 2h the final norm, and
// the copy of the word embedding V h (no positions).
//
// Where the vocabulary is not a unit (engine::vocabulary_blocks: one stage, or untied), the
// word embedding is never gathered: each pass swaps d x tokens x h floats of its rows instead
// (d = 2, 1024 tokens), and the output layer is gathered in blocks of 6144 rows (half of
// ZeRO-3's 10M-float bucket, in whole 2 MiB pages: multiples of 2048 rows of 768), 8 of them
// and one of 1152 rows, up and down again for the one chunk of 1024 logits rows (its height
// is at least h: tensor_parallel::lm_head_chunk_rows), less the last block at the turn up.
TEST(PlannerSharding, ZeroThreeGathersEveryUnitAsTrainingsPassesAskForIt) {
  const double copy = kPaddedVocab * kH, norm = 2 * kH, positions = kPositions * kH;
  const double swapped = 2 * 1024 * kH;
  const double head = (2 * kPaddedVocab - 1152) * kH;
  const Gathers one_stage_tied{kPsi - copy + swapped + head, kPsi - kEmbedding + swapped, positions,
                               norm};
  const Gathers one_stage_untied{kPsi - copy + swapped + head, kPsi - kEmbedding + swapped,
                                 positions, norm};
  // p = 2, training's default split (engine/pipeline_split.h: at s = 1024 a layer is 17.3
  // MFLOP per token, the output layer 77.3, so 8 | 4 + 4.47 layers' worth): stage 0 the
  // embedding and layers 0-7, stage 1 layers 8-11 and the final norm; a tied embedding, split
  // across them, stays a unit.
  const Gathers first{kEmbedding + 8 * kLayer, 8 * kLayer, kEmbedding, kLayer};
  const Gathers first_untied{positions + 8 * kLayer + swapped, 8 * kLayer + swapped, positions,
                             kLayer};
  const Gathers last_tied{copy + 4 * kLayer + norm, 4 * kLayer + norm, kLayer, norm};
  const Gathers last_untied{4 * kLayer + norm + head, 4 * kLayer + norm, kLayer, norm};
  // p = 2, v = 3: two layers a chunk; every chunk's pass waits for its own first unit.
  const Gathers first_v3{kEmbedding + 6 * kLayer, 6 * kLayer, kEmbedding + 2 * kLayer, 3 * kLayer};
  const Gathers last_v3_tied{copy + 6 * kLayer + norm, 6 * kLayer + norm, 3 * kLayer,
                             2 * kLayer + norm};
  for (bool tied : {true, false}) {
    Workload w = gpt2_small(8);
    w.model.untie_embeddings_and_output_weights = !tied;
    IterationModel model(one_node(8), w);
    Layout l = layout(2, 1, ShardingStrategy::kOptimGradsParams);
    const std::string name = tied ? "tied" : "untied";
    expect_gathers(model.stage_parameters(l, 0), tied ? one_stage_tied : one_stage_untied,
                   name + " p=1");
    l.pipeline = 2;
    expect_gathers(model.stage_parameters(l, 0), tied ? first : first_untied,
                   name + " p=2 stage 0");
    expect_gathers(model.stage_parameters(l, 1), tied ? last_tied : last_untied,
                   name + " p=2 stage 1");
    if (!tied) continue;
    l.virtual_stages = 3;
    expect_gathers(model.stage_parameters(l, 0), first_v3, "tied p=2 v=3 stage 0");
    expect_gathers(model.stage_parameters(l, 1), last_v3_tied, "tied p=2 v=3 stage 1");
  }
}

// ZeRO-3's floats per micro-batch on gpt2-small at seq 1024 (see the two tests around it).
double kZeroThreeFloats(int d) {
  const double vh = kPaddedVocab * kH, swapped = d * 1024 * kH;
  const double head = (2 * kPaddedVocab - 1152) * kH;
  return (kPsi - vh + swapped + head) + (kPsi - kEmbedding + swapped) + kPsi;
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
    // ZeRO-3: per micro-batch, the weights gathered for forward and for backward (but not
    // the embedding: its backward reads no weights), and the gradients reduce-scattered —
    // with the vocabulary out of the units (ZeroThreeGathersEveryUnitAsTrainingsPassesAskForIt,
    // here with d = 4 ranks swapping rows): forward Psi - V h + rows + the output layer's
    // blocks, backward Psi - E + rows, and the gradients Psi + V h (the output layer's blocks
    // once, for the one chunk of logits rows).
    const double zero3 = (d - 1.0) / d * kZeroThreeFloats(d) * 4;
    EXPECT_NEAR(bytes(ShardingStrategy::kOptimGradsParams), m * zero3, 1e-9 * zero3);
  }
  // Untied alike: the output layer's V h more in Psi is gathered and reduced as the tied one
  // was, and the input embedding, now the other V h, is neither.
  Workload untied = gpt2_small(2 * d);
  untied.model.untie_embeddings_and_output_weights = true;
  IterationModel model(one_node(d), untied);
  const double want = 2 * kZeroThreeFloats(d) * (d - 1.0) / d * 4;
  EXPECT_NEAR(model.predict(layout(d, 1, ShardingStrategy::kOptimGradsParams)).data_parallel_bytes,
              want, 1e-9 * want);
}

// The ZeRO paper, section 7.2.2: ZeRO-3 "incurs a total communication volume of 3 Psi, compared
// to 2 Psi" of standard data parallelism: 1.5x, at one micro-batch per step. trident trades
// memory for more on the vocabulary: its output layer is gathered twice and reduced once per
// chunk of logits rows, and swaps rows of the word embedding (one chunk at seq 1024:
// gpt2-small moves 1.51x plain data parallelism at d = 2, 1.54x at d = 8).
TEST(PlannerSharding, ZeroThreeMovesOneAndAHalfTimesPlainDataParallelism) {
  for (int d : {2, 4, 8}) {
    IterationModel model(one_node(d), gpt2_small(d));
    const double plain =
        model.predict(layout(d, 1, ShardingStrategy::kNoShard)).data_parallel_bytes;
    const double zero3 =
        model.predict(layout(d, 1, ShardingStrategy::kOptimGradsParams)).data_parallel_bytes;
    EXPECT_NEAR(zero3 / plain, kZeroThreeFloats(d) / (2 * kPsi), 1e-12) << "d = " << d;
    EXPECT_LT(zero3 / plain, 2.0);
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
  // ZeRO-3, by training's rule (engine::held_weight_floats): the fp32 weights held are the
  // rank's shard S = Psi / d plus the units a pass holds outside it — the one running and the
  // next; the vocabulary is not a unit but blocks of 6144 rows (4.7M floats), smaller than a
  // layer — worst with two layers, on a rank whose shard misses them (rank 0: its shard is
  // all word embedding), plus two 2 MiB pages (524,288 floats each) per unit for the pages
  // their edges split; the bf16 copy of the shard (the source of the linear weights' gathers)
  // and of those units.
  EXPECT_NEAR(zero2.weights, 6 * kPsi, tolerance);
  const double held = 2 * kLayer, pages = 2 * 2 * 524288.0;
  ASSERT_LT(held, 2 * kPsi / d);
  EXPECT_NEAR(zero3.weights, 4 * (kPsi / d + held + pages) + 2 * (kPsi / d + held), 4);
  // ZeRO-3 keeps one bucket in reduction, not two (data_parallel::sharded_buckets_in_flight).
  EXPECT_LT(zero3.gradients, zero2.gradients);
  EXPECT_GE(zero3.gradients, 4 * kPsi / d);
  EXPECT_EQ(zero3.optimizer, zero2.optimizer);
  EXPECT_EQ(zero3.activations, none.activations);
}

// One source: the planner's memory for a ZeRO-3 layout is training's plan for it,
// engine::planned_rank_memory over the engine's own layout written out here, on the stage
// the planner reports (the fuller end of the pipeline).
TEST(PlannerSharding, ZeroThreeMemoryIsTrainingsPlan) {
  struct Case {
    int p, v;
    Recompute recompute;
    bool tied;
    kernels::Precision precision;
  };
  for (const Case& c : {Case{1, 1, Recompute::kNone, true, kernels::Precision::kBf16},
                        Case{1, 1, Recompute::kFull, false, kernels::Precision::kFp32},
                        Case{2, 1, Recompute::kNone, true, kernels::Precision::kBf16},
                        Case{2, 3, Recompute::kSelective, false, kernels::Precision::kBf16}}) {
    const int d = 2, b = 2;
    Workload w = gpt2_small(8 * d);
    w.model.untie_embeddings_and_output_weights = !c.tied;
    w.precision = c.precision;
    IterationModel model(one_node(8), w);
    Layout l{1, c.p, d, b, c.v, c.recompute, ShardingStrategy::kOptimGradsParams};
    const MemoryBreakdown planned = model.device_memory(l);
    engine::RankLayout r;
    r.model = w.model;
    r.pipeline = c.p, r.data = d, r.virtual_stages = c.v, r.micro_batch = b;
    // The split training runs without a split flag (8 | 4 at p = 2, v = 1; else even).
    r.split = c.p == 2 && c.v == 1 ? std::vector<int>{8, 4}
                                   : std::vector<int>(c.p * c.v, 12 / (c.p * c.v));
    r.precision = c.precision;
    r.recompute_granularity = c.recompute == Recompute::kFull        ? "full"
                              : c.recompute == Recompute::kSelective ? "selective"
                                                                     : "";
    r.distributed_optimizer = r.shard_gradients = r.shard_parameters = true;
    const int m = 8 / b;
    const auto kind = c.v > 1 ? pipeline_parallel::ScheduleKind::kInterleaved
                              : pipeline_parallel::ScheduleKind::kOneFOneB;
    auto plan = [&](int stage) {
      return engine::planned_rank_memory(r, stage,
                                         engine::schedule_needs({{kind, c.p, c.v, m}}, stage), m,
                                         /*overlap_grad_reduce=*/true);
    };
    const engine::RankMemoryPlan training = plan(planned.stage);
    SCOPED_TRACE(l.describe());
    EXPECT_EQ(planned.total() - planned.runtime, (double)training.total_bytes());
    EXPECT_EQ(planned.weights + planned.gradients, (double)training.group_bytes("parameters"));
    EXPECT_EQ(planned.optimizer, (double)training.group_bytes("optimizer"));
    EXPECT_LE(plan(c.p - 1 - planned.stage).total_bytes(), training.total_bytes());
  }
}

// The exposed time, worked by hand: Psi = 100M floats (400 MB) over d = 4 at 1 GB/s with no
// latency, so a reduce-scatter or all-gather of Psi takes 0.75 x 0.4 s = 0.3 s and an
// all-reduce 0.6 s; 10M-float buckets; a micro-batch's forward 0.1 s, its backward 0.2 s;
// m = 2. ZeRO-3 gathers all 100M floats in forward, waiting for a 40M-float first unit, and
// 60M in backward (0.18 s), waiting for a 10M-float one.
TEST(PlannerSharding, ExposedTimeWorkedByHand) {
  const LinkSpec link{1, 0};
  DataParallelWork w;
  w.data = 4, w.microbatches = 2;
  w.parameter_floats = 100e6, w.bucket_floats = 10e6;
  w.gathers.forward = 100e6, w.gathers.forward_waited = 40e6;
  w.gathers.backward = 60e6, w.gathers.backward_waited = 10e6;
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
  // ZeRO-3: per micro-batch 0.3 + 0.18 + 0.3 s; the forward's gather less the forward (0.2),
  // the backward's gather and reduce-scatter less the backward (0.28). Sent: 0.75 x 260M
  // floats x 4 bytes per micro-batch.
  EXPECT_NEAR(traffic(ShardingStrategy::kOptimGradsParams).seconds, 2 * 0.78, 1e-12);
  EXPECT_NEAR(traffic(ShardingStrategy::kOptimGradsParams).exposed, 2 * 0.48, 1e-12);
  EXPECT_NEAR(traffic(ShardingStrategy::kOptimGradsParams).bytes, 2 * 0.75 * 260e6 * 4, 1);
  // Ample compute: only the last bucket of each reduction (10% of 0.3 s), and ZeRO-3's first
  // units (40% of the forward's 0.3 s gather, 1/6 of the backward's 0.18 s), wait.
  w.forward = w.backward = 10;
  EXPECT_NEAR(traffic(ShardingStrategy::kNoShard).exposed, 0.06, 1e-12);
  EXPECT_NEAR(traffic(ShardingStrategy::kOptimGrads).exposed, 2 * 0.03, 1e-12);
  EXPECT_NEAR(traffic(ShardingStrategy::kOptimGradsParams).exposed, 2 * (0.12 + 0.03 + 0.03),
              1e-12);
}

// A tied output layer on a pipeline: the end stages' bucket holding the word embedding waits
// for the two stages' sum, so it is reduce-scattered once per iteration. Psi = 100M floats, of
// them H = 40M held back, over d = 4 at 1 GB/s (a reduce-scatter of 60M floats takes 0.18 s,
// of 40M 0.12 s); m = 2, the micro-batch and gathers of ExposedTimeWorkedByHand.
TEST(PlannerSharding, HeldBackBucketsReduceOncePerIterationWorkedByHand) {
  const LinkSpec link{1, 0};
  DataParallelWork w;
  w.data = 4, w.microbatches = 2;
  w.parameter_floats = 100e6, w.bucket_floats = 10e6, w.held_back_floats = 40e6;
  w.gathers.forward = 100e6, w.gathers.forward_waited = 40e6;
  w.gathers.backward = 60e6, w.gathers.backward_waited = 10e6;
  w.forward = 0.1, w.backward = 0.2;
  // ZeRO-2: 2 x 0.18 + 0.12 + the gather 0.3; exposed: each micro-batch's last bucket
  // (10/60 of 0.18), the held bucket, the gather less the forward (0.2).
  const DataParallelTraffic zero2 = data_parallel_traffic(ShardingStrategy::kOptimGrads, w, link);
  EXPECT_NEAR(zero2.seconds, 0.78, 1e-12);
  EXPECT_NEAR(zero2.exposed, 2 * 0.03 + 0.12 + 0.2, 1e-12);
  EXPECT_NEAR(zero2.bytes, 0.75 * (2 * 60e6 + 40e6 + 100e6) * 4, 1);
  // ZeRO-3: per micro-batch 0.3 + 0.18 of gathers and 0.18 of reduce-scatter, then 0.12;
  // exposed per micro-batch 0.3 - 0.1 and 0.18 + 0.18 - 0.2, then the held bucket.
  const DataParallelTraffic zero3 =
      data_parallel_traffic(ShardingStrategy::kOptimGradsParams, w, link);
  EXPECT_NEAR(zero3.seconds, 2 * 0.66 + 0.12, 1e-12);
  EXPECT_NEAR(zero3.exposed, 2 * (0.2 + 0.16) + 0.12, 1e-12);
  EXPECT_NEAR(zero3.bytes, 0.75 * (2 * 160e6 + 2 * 60e6 + 40e6) * 4, 1);
}

// The bytes of a small tied model on p = 2 (2 layers, h = 64, the 500-word vocabulary padded
// to 512, 32 positions), d = 2, m = 4: each stage's buffer is one bucket (under 10M floats),
// held back whole. Stage 0 holds E = (512 + 32) 64 and layer L = 12 h^2 + 13 h; forward
// gathers E + L, backward L. Stage 1 holds the copy of the word embedding C = 512 x 64, L and
// the final norm (2h); forward gathers all of it, backward L + 2h. (trident train's own count
// on stage 0: 12 all-gathers and one reduce-scatter per iteration.)
TEST(PlannerSharding, ZeroThreeBytesOnATiedPipelineByHand) {
  Workload w;
  w.model.num_layers = 2, w.model.hidden_size = 64, w.model.num_attention_heads = 2;
  w.model.seq_length = 32, w.model.vocab_size = 500;
  w.global_batch = 8;
  IterationModel model(one_node(4), w);
  const double h = 64, E = (512 + 32) * h, C = 512 * h, L = 12 * h * h + 13 * h;
  const double half = 0.5 * 4;  // (d - 1) / d of fp32
  const double stage0 = 4 * half * ((E + L) + L) + half * (E + L);
  const double stage1 = 4 * half * ((C + L + 2 * h) + (L + 2 * h)) + half * (C + L + 2 * h);
  const Prediction p =
      model.predict({1, 2, 2, 1, 1, Recompute::kNone, ShardingStrategy::kOptimGradsParams});
  EXPECT_DOUBLE_EQ(p.data_parallel_bytes, p.memory.stage == 0 ? stage0 : stage1);
  // ZeRO-2: the one held-back reduce-scatter and the all-gather of the values.
  const Prediction zero2 =
      model.predict({1, 2, 2, 1, 1, Recompute::kNone, ShardingStrategy::kOptimGrads});
  const double psi = zero2.memory.stage == 0 ? E + L : C + L + 2 * h;
  EXPECT_DOUBLE_EQ(zero2.data_parallel_bytes, 2 * half * psi);
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
