// The closed-form lower bound against Megatron's parameter count, written out here from
// the PTD-P paper (Narayanan et al. 2021, section 5.1): P = 12 l h^2 (1 + 13 / (12 h) +
// (V + s) / (12 l h)), plus the final LayerNorm's 2 h the formula leaves out; against the
// exact plan (it must never exceed it, or a model that fits would be refused); and, in
// double, for sizes whose count overflows a long.
#include <gtest/gtest.h>

#include "engine/memory_bound.h"
#include "engine/rank_memory.h"

namespace trident::engine {
namespace {

namespace pp = pipeline_parallel;

double megatron_parameters(double l, double h, double v, double s) {
  return 12 * l * h * h * (1 + 13 / (12 * h) + (v + s) / (12 * l * h));
}

ModelConfig gpt(int layers, int hidden, int heads, int seq, int vocab) {
  ModelConfig m;
  m.num_layers = layers, m.hidden_size = hidden, m.num_attention_heads = heads;
  m.seq_length = seq, m.vocab_size = vocab;
  return m;
}

TEST(MemoryBound, CountsMegatronsParametersAtSixteenBytesEach) {
  RankLayout l;
  l.model = gpt(48, 4096, 32, 2048, 50257);  // padded to 50304
  const MemoryBound b = memory_lower_bound(l);
  const double want = megatron_parameters(48, 4096, 50304, 2048) + 2 * 4096;
  EXPECT_DOUBLE_EQ(b.parameters, want);
  EXPECT_DOUBLE_EQ(b.rank_parameters, want);
  EXPECT_DOUBLE_EQ(b.parameter_bytes(), 16 * want);
  // Each of the 48 layers keeps its input: micro-batch 1 x 2048 tokens x h floats.
  EXPECT_DOUBLE_EQ(b.activation_bytes, 48.0 * 2048 * 4096 * 4);
  l.distributed_optimizer = true, l.data = 4;  // Adam moments sharded: 8 + 8 / 4
  EXPECT_DOUBLE_EQ(memory_lower_bound(l).bytes_per_parameter, 10);
}

TEST(MemoryBound, SizesBeyondALongStayFinite) {
  RankLayout l;
  l.model = gpt(2000000000, 500000000, 1, 128, 50257);
  const MemoryBound b = memory_lower_bound(l);
  const double want = megatron_parameters(2e9, 5e8, 50304, 128) + 2 * 5e8;
  EXPECT_GT(want, 9.3e18);  // beyond a long
  EXPECT_NEAR(b.parameters, want, 1e-12 * want);
  EXPECT_GT(b.total_bytes(), 16 * want);
}

RankModelOptions options(const ModelConfig& m, int t, int p, int d, int micro_batch) {
  RankModelOptions o;
  o.layout.model = m;
  o.layout.tensor = t, o.layout.pipeline = p, o.layout.data = d;
  o.layout.micro_batch = micro_batch;
  o.layout.split = RankLayout::even_split(m.num_layers, p);
  o.schedule = {pp::ScheduleKind::kOneFOneB, p, 1, 4};
  o.schedules = {o.schedule};
  o.reduce.overlap = false;
  return o;
}

TEST(MemoryBound, NeverAboveTheExactPlan) {
  const ModelConfig shapes[] = {gpt(4, 64, 4, 32, 1000), gpt(8, 32, 2, 16, 5000),
                                gpt(6, 128, 8, 64, 300)};
  for (const ModelConfig& m : shapes)
    for (int t : {1, 2})
      for (int p : {1, 2})
        for (int variant = 0; variant < 4; ++variant) {
          RankModelOptions o = options(m, t, p, 2, 1 + variant % 2);
          if (variant == 1) o.layout.precision = kernels::Precision::kBf16;
          if (variant == 2) o.layout.distributed_optimizer = o.reduce.distributed_optimizer = true;
          if (variant == 3) {
            o.layout.recompute_granularity = "full", o.layout.recompute_num_layers = 2;
            o.layout.sequence_parallel = t > 1;
          }
          const double bound = memory_lower_bound(o.layout).total_bytes();
          const double plan = (double)fullest_stage(o).plan.total_bytes();
          EXPECT_LE(bound, plan) << "h " << m.hidden_size << " t " << t << " p " << p << " variant "
                                 << variant;
          EXPECT_GT(bound, 0.3 * plan);  // and not a vacuous bound
        }
}

TEST(MemoryBound, MostRemediedHasOneLayerPerStageShardedMomentsAndTheMostCpRanks) {
  RankLayout l;
  l.model = gpt(12, 64, 4, 32, 1000);
  l.data = 2, l.micro_batch = 4;
  const RankLayout r = most_remedied(l);
  EXPECT_EQ(r.pipeline, 12);
  // The sequence of 32 split into 2c chunks: c = 16 at most, the weights over d x c.
  EXPECT_EQ(r.context, 16);
  EXPECT_EQ(r.data, 2048 * 16);
  EXPECT_TRUE(r.distributed_optimizer);
  EXPECT_EQ(r.micro_batch, 1);
  EXPECT_LT(memory_lower_bound(r).total_bytes(), memory_lower_bound(l).total_bytes());
}

}  // namespace
}  // namespace trident::engine
