// RankLayout against Megatron's rules worked by hand: where each virtual stage sits, which
// pipeline rank owns a tensor, which layers recompute, how many micro-batches a 1F1B,
// GPipe or ramped-up schedule keeps in flight on each stage, and a rank's buffers.
#include <gtest/gtest.h>

#include "engine/rank_layout.h"

namespace trident::engine {
namespace {

namespace pp = pipeline_parallel;

RankLayout layout(int p, int v, std::vector<int> split) {
  RankLayout l;
  l.model.num_layers = 0;
  for (int n : split) l.model.num_layers += n;
  l.pipeline = p, l.virtual_stages = v, l.split = std::move(split);
  return l;
}

void expect_placement(const ChunkPlacement& got, int first, int layers, bool pre, bool post) {
  EXPECT_EQ(got.first_layer, first);
  EXPECT_EQ(got.num_layers, layers);
  EXPECT_EQ(got.pre_process, pre);
  EXPECT_EQ(got.post_process, post);
}

TEST(RankLayout, PlacesUnevenStagesInOrder) {
  // --decoder-first-pipeline-num-layers 3 --decoder-last-pipeline-num-layers 1, p = 4.
  const RankLayout l = layout(4, 1, {3, 2, 2, 1});
  expect_placement(l.placement(0, 0), 0, 3, true, false);
  expect_placement(l.placement(1, 0), 3, 2, false, false);
  expect_placement(l.placement(2, 0), 5, 2, false, false);
  expect_placement(l.placement(3, 0), 7, 1, false, true);
}

TEST(RankLayout, InterleavedChunkJOfStageSIsVirtualStageJTimesPPlusS) {
  const RankLayout l = layout(2, 2, RankLayout::even_split(8, 4));
  expect_placement(l.placement(0, 0), 0, 2, true, false);   // virtual stage 0
  expect_placement(l.placement(1, 0), 2, 2, false, false);  // 1
  expect_placement(l.placement(0, 1), 4, 2, false, false);  // 2
  expect_placement(l.placement(1, 1), 6, 2, false, true);   // 3: the output layer
}

TEST(RankLayout, OwnerOfATensorIsTheStageHoldingItsLayer) {
  const RankLayout interleaved = layout(2, 2, RankLayout::even_split(8, 4));
  EXPECT_EQ(interleaved.owner_of("embedding.word_embeddings.weight"), 0);
  EXPECT_EQ(interleaved.owner_of("layers.1.mlp.linear_fc1.weight"), 0);
  EXPECT_EQ(interleaved.owner_of("layers.3.mlp.linear_fc1.weight"), 1);
  EXPECT_EQ(interleaved.owner_of("layers.4.mlp.linear_fc1.weight"), 0);  // virtual stage 2
  EXPECT_EQ(interleaved.owner_of("layers.7.mlp.linear_fc1.weight"), 1);
  EXPECT_EQ(interleaved.owner_of("final_layernorm.weight"), 1);
  EXPECT_EQ(interleaved.owner_of("output_layer.weight"), 1);
  const RankLayout uneven = layout(3, 1, {1, 3, 2});
  EXPECT_EQ(uneven.owner_of("layers.0.self_attention.linear_qkv.weight"), 0);
  EXPECT_EQ(uneven.owner_of("layers.3.self_attention.linear_qkv.weight"), 1);
  EXPECT_EQ(uneven.owner_of("layers.4.self_attention.linear_qkv.weight"), 2);
  EXPECT_THROW(uneven.owner_of("layers.6.self_attention.linear_qkv.weight"), std::out_of_range);
}

TEST(RankLayout, RecomputationFollowsMegatronsMethods) {
  RankLayout l;
  EXPECT_EQ(l.recomputed_layers(4), 0);
  l.recompute_granularity = "selective";
  EXPECT_EQ(l.recomputed_layers(4), 0);  // the attention core only, not whole layers
  EXPECT_EQ(l.recompute_group_size(), 1);
  l.recompute_granularity = "full", l.recompute_method = "uniform", l.recompute_num_layers = 3;
  EXPECT_EQ(l.recomputed_layers(4), 4);  // every layer, in groups of 3
  EXPECT_EQ(l.recompute_group_size(), 3);
  l.recompute_method = "block", l.recompute_num_layers = 3;
  EXPECT_EQ(l.recomputed_layers(4), 3);  // the first 3 of each chunk, one by one
  EXPECT_EQ(l.recomputed_layers(2), 2);  // a smaller chunk: all of it
  EXPECT_EQ(l.recompute_group_size(), 1);
}

TEST(ScheduleNeeds, OneFOneBKeepsPMinusSMicroBatchesOnStageS) {
  // Megatron's 1F1B: stage s runs p - s - 1 warm-up forwards, then one more before its
  // first backward, so p - s activations are alive at once (m >= p).
  for (int s = 0; s < 4; ++s) {
    const ScheduleNeeds n = schedule_needs({{pp::ScheduleKind::kOneFOneB, 4, 1, 8}}, s);
    EXPECT_EQ(n.slots, std::vector<int>{4 - s}) << "stage " << s;
    EXPECT_EQ(n.deferred, std::vector<int>{0});
  }
  // GPipe holds every micro-batch before the first backward.
  EXPECT_EQ(schedule_needs({{pp::ScheduleKind::kGPipe, 4, 1, 8}}, 2).slots, std::vector<int>{8});
}

TEST(ScheduleNeeds, ARampUpNeedsTheMostOfItsSchedules) {
  // m grows 1 -> 2 -> 8 with the global batch: stage 0 of p = 4 holds min(m, 4).
  std::vector<pp::ScheduleConfig> ramp;
  for (int m : {1, 2, 8}) ramp.push_back({pp::ScheduleKind::kOneFOneB, 4, 1, m});
  EXPECT_EQ(schedule_needs(ramp, 0).slots, std::vector<int>{4});
  EXPECT_EQ(schedule_needs({ramp[0], ramp[1]}, 0).slots, std::vector<int>{2});
}

TEST(ChunkOptions, CarryTheLayoutsOptions) {
  RankLayout l = layout(2, 1, {3, 3});
  l.data = 4, l.distributed_optimizer = true, l.sequence_parallel = true;
  l.recompute_granularity = "full", l.recompute_method = "block", l.recompute_num_layers = 2;
  l.precision = kernels::Precision::kBf16, l.logits_chunk_rows = 64;
  const ScheduleNeeds needs{{5}, {0}, {0}};
  const ChunkOptions o = chunk_options(l, 1, 0, needs);
  expect_placement(o.placement, 3, 3, false, true);
  EXPECT_EQ(o.slots, 5);
  EXPECT_EQ(o.recompute_layers, 2);
  EXPECT_EQ(o.recompute_group, 1);
  EXPECT_EQ(o.pad_multiple, 16 * 4);  // each of d shards a multiple of 16 floats
  EXPECT_TRUE(o.sequence_parallel);
  EXPECT_EQ(o.precision, kernels::Precision::kBf16);
  EXPECT_EQ(o.logits_chunk_rows, 64);
  EXPECT_EQ(adam_moment_floats(l, 1024), 2 * 1024 / 4);
  l.distributed_optimizer = false;
  EXPECT_EQ(adam_moment_floats(l, 1024), 2 * 1024);
}

TEST(RankBufferShape, TiedEmbeddingOnlyWhenTiedAndBoundaryOverT) {
  RankLayout l = layout(2, 1, {2, 2});
  l.model.hidden_size = 64, l.model.seq_length = 32, l.model.vocab_size = 1000;
  l.micro_batch = 2, l.tensor = 2, l.sequence_parallel = true;
  RankBufferShape s = rank_buffer_shape(l, 1, 4, 5000, true);
  EXPECT_EQ(s.boundary_floats, 2L * 32 * 64 / 2);  // a stage sends its 1/t of the rows
  // Megatron pads V to a multiple of 128 t = 256: 1024 rows, 512 on each tensor rank.
  EXPECT_EQ(s.tied_embedding_floats, 512L * 64);
  l.model.untie_embeddings_and_output_weights = true;
  s = rank_buffer_shape(l, 1, 4, 5000, true);
  EXPECT_EQ(s.tied_embedding_floats, 0);
  const MemoryPlan plan = plan_rank_buffers(s);
  for (const PlannedBuffer& b : plan.buffers())
    EXPECT_EQ(b.name.find("tied"), std::string::npos) << "an untied model plans " << b.name;
}

}  // namespace
}  // namespace trident::engine
