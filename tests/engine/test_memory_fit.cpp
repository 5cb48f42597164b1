// The remedies for a layout that does not fit, against what Megatron's memory arithmetic
// says by hand: with fp32 weights and gradients (8 bytes per parameter) and Adam moments
// (8, or 8/d sharded by the distributed optimizer), a weight-dominated model fits half its
// moments' bytes lower on two data-parallel ranks, or on two pipeline stages that hold half
// the layers each; an activation-dominated one fits with half the micro-batch; nothing fits
// in a kilobyte.
#include <gtest/gtest.h>

#include "engine/memory_fit.h"
#include "engine/rank_memory.h"

namespace trident::engine {
namespace {

namespace pp = pipeline_parallel;

RankModelOptions options(const ModelConfig& m, int micro_batch) {
  RankModelOptions o;
  o.layout.model = m;
  o.layout.micro_batch = micro_batch;
  o.layout.split = {m.num_layers};
  o.schedule = {pp::ScheduleKind::kOneFOneB, 1, 1, 1};
  o.schedules = {o.schedule};
  o.reduce.overlap = false;  // trident train's default: no MPI temporaries
  return o;
}

// 2 layers of h = 256 on 8 tokens: weights, gradients and moments are nearly everything.
ModelConfig weight_heavy() {
  ModelConfig m;
  m.num_layers = 2, m.hidden_size = 256, m.num_attention_heads = 4, m.seq_length = 8;
  m.vocab_size = 1000;  // padded to 1024
  return m;
}

// Megatron's count: embedding and positions, 12 h^2 + 13 h per layer, the final LayerNorm.
constexpr long kWeightHeavyParameters =
    1024L * 256 + 8 * 256 + 2 * (12L * 256 * 256 + 13 * 256) + 2 * 256;

// Every remedy as the refusal lists it, for failure messages.
std::string listed(const std::vector<MemoryRemedy>& remedies) {
  std::string out;
  for (const MemoryRemedy& r : remedies) out += "\n  " + r.describe(1);
  return out;
}

TEST(MemoryRemedies, MoreRanksForAWeightHeavyModel) {
  const RankModelOptions o = options(weight_heavy(), 1);
  const long need = needed_bytes(o), moments = 8 * kWeightHeavyParameters;
  ASSERT_EQ(kWeightHeavyParameters % 32, 0);  // no padding at d = 1 or 2
  // Half the moments too much: bf16 (a 16-bit weight copy more) and recomputation (a few
  // tokens' activations) cannot save it; halving the moments or the layers can.
  const long available = need - moments / 2 + 4096;
  const std::vector<MemoryRemedy> remedies = memory_remedies(o, available);
  ASSERT_EQ(remedies.size(), 2u) << listed(remedies) << "\nneed " << need << ", available "
                                 << available;
  EXPECT_EQ(remedies[0].flags, "--pipeline-model-parallel-size 2");
  EXPECT_EQ(remedies[0].world_size, 2);
  EXPECT_EQ(remedies[1].flags, "--use-distributed-optimizer --global-batch-size 2");
  EXPECT_EQ(remedies[1].world_size, 2);
  EXPECT_EQ(remedies[1].needed_bytes, need - moments / 2);  // ZeRO-1: moments / d
  for (const MemoryRemedy& r : remedies) EXPECT_LE(r.needed_bytes, available) << r.flags;
  EXPECT_EQ(remedies[0].describe(1),
            "--pipeline-model-parallel-size 2 on 2 ranks instead of 1, as many per node as now: " +
                format_bytes((double)remedies[0].needed_bytes) + " per rank");
  // With three quarters of the moments to save, two data-parallel ranks are not enough.
  const std::vector<MemoryRemedy> fewer = memory_remedies(o, need - moments * 3 / 4 + 4096);
  ASSERT_FALSE(fewer.empty());
  EXPECT_EQ(fewer.back().flags, "--use-distributed-optimizer --global-batch-size 4");
  EXPECT_EQ(fewer.back().world_size, 4);
}

TEST(MemoryRemedies, SmallerMicroBatchForAnActivationHeavyModel) {
  ModelConfig m;
  m.num_layers = 2, m.hidden_size = 32, m.num_attention_heads = 2, m.seq_length = 256;
  m.vocab_size = 64;
  const RankModelOptions o = options(m, 8);
  const long need = needed_bytes(o);
  // Activations and scratch grow with the micro-batch's tokens: 4 sequences take about half
  // of what 8 do (7, 6 and 5 do not divide the global batch of 8).
  const std::vector<MemoryRemedy> remedies = memory_remedies(o, need * 6 / 10);
  bool listed = false;
  for (const MemoryRemedy& r : remedies)
    // The global batch stays 8 (its default is one micro-batch per replica).
    if (r.flags == "--micro-batch-size 4 --global-batch-size 8") {
      listed = true;
      EXPECT_EQ(r.world_size, 1);
      EXPECT_GT(r.needed_bytes, need * 4 / 10);
      EXPECT_LE(r.needed_bytes, need * 6 / 10);
      EXPECT_EQ(r.describe(1), "--micro-batch-size 4 --global-batch-size 8: " +
                                   format_bytes((double)r.needed_bytes) + " per rank");
    }
  EXPECT_TRUE(listed);
}

TEST(MemoryRemedies, NoneWhenNothingTriedFits) {
  EXPECT_TRUE(memory_remedies(options(weight_heavy(), 1), 1024).empty());
}

TEST(MemoryRemedies, TogetherWhenNoneFitsAlone) {
  // An activation-heavy model, with less memory each time than any single change on its
  // ranks needed the time before: at last full recomputation and a micro-batch of 1
  // together, which keep fewer activations than either alone.
  ModelConfig m;
  m.num_layers = 2, m.hidden_size = 32, m.num_attention_heads = 2, m.seq_length = 256;
  m.vocab_size = 64;
  const RankModelOptions o = options(m, 8);
  const auto together = [](const MemoryRemedy& r) {
    return r.flags.find("--recompute-granularity full") != std::string::npos &&
           r.flags.find("--micro-batch-size 1") != std::string::npos;
  };
  long available = needed_bytes(o), smallest_alone = available;
  std::vector<MemoryRemedy> remedies;
  for (int round = 0; round < 10; ++round) {
    remedies = memory_remedies(o, available);
    if (remedies.empty() || remedies[0].world_size != 1 || together(remedies[0])) break;
    for (const MemoryRemedy& r : remedies)
      if (r.world_size == 1) smallest_alone = std::min(smallest_alone, r.needed_bytes);
    available = smallest_alone - 1;
  }
  ASSERT_FALSE(remedies.empty());
  EXPECT_TRUE(together(remedies[0])) << listed(remedies);
  EXPECT_EQ(remedies[0].world_size, 1);
  EXPECT_LT(remedies[0].needed_bytes, smallest_alone);
}

// A long sequence's activations: each rank of a cp group keeps seq / c tokens' activations,
// so --context-parallel-size is a remedy (on c times the ranks, the same samples); a run at
// c = 2 keeps its c in every other remedy (world t x c x p x d, global batch of d replicas).
TEST(MemoryRemedies, ContextParallelismForALongSequence) {
  ModelConfig m;
  m.num_layers = 4, m.hidden_size = 64, m.num_attention_heads = 2, m.seq_length = 4096;
  m.vocab_size = 64;
  RankModelOptions o = options(m, 1);
  const long need = needed_bytes(o);
  const long available = need * 6 / 10;
  const std::vector<MemoryRemedy> remedies = memory_remedies(o, available);
  const MemoryRemedy* cp = nullptr;
  const std::string flag = "--context-parallel-size ";
  for (const MemoryRemedy& r : remedies)
    if (r.flags.rfind(flag, 0) == 0) cp = &r;
  ASSERT_NE(cp, nullptr) << listed(remedies);
  const int c = std::stoi(cp->flags.substr(flag.size()));
  EXPECT_EQ(cp->world_size, c);  // the same samples on c times the ranks
  EXPECT_LE(cp->needed_bytes, available);
  auto at = [&](int context) {
    RankModelOptions x = o;
    x.layout.context = context, x.layout.data = context;
    return x;
  };
  EXPECT_EQ(needed_bytes(at(c)), cp->needed_bytes);
  if (c > 2) EXPECT_GT(needed_bytes(at(c / 2)), available) << "the fewest cp ranks that fit";
  // Each rank keeps seq / c tokens' activations (Megatron's activations / c).
  const double activations = (double)fullest_stage(o).plan.group_bytes("activations");
  EXPECT_NEAR(fullest_stage(at(c)).plan.group_bytes("activations") * c / activations, 1, 1e-3);

  // Already at c = 2 (d x c = 2 replicas of the weights, one data-parallel rank).
  RankModelOptions at2 = o;
  at2.layout.context = 2, at2.layout.data = 2;
  const long need2 = needed_bytes(at2);
  for (const MemoryRemedy& r : memory_remedies(at2, need2 * 6 / 10)) {
    EXPECT_EQ(r.world_size % 2, 0) << r.flags;  // c = 2 kept
    if (r.flags.find("--context-parallel-size") != std::string::npos) {
      EXPECT_EQ(r.flags, "--context-parallel-size 4");
      EXPECT_EQ(r.world_size, 4);
    }
  }
  // The distributed optimizer over twice the replicas: d = 2 (world 4), global batch 2.
  const long moments = needed_bytes(at2) - needed_bytes([&] {
                         RankModelOptions x = at2;
                         x.layout.distributed_optimizer = x.reduce.distributed_optimizer = true;
                         return x;
                       }());
  bool data = false;
  for (const MemoryRemedy& r : memory_remedies(at2, need2 - moments / 2 + 64))
    if (r.flags == "--use-distributed-optimizer --global-batch-size 2") data = r.world_size == 4;
  EXPECT_TRUE(data) << listed(memory_remedies(at2, need2 - moments / 2 + 64));
}

}  // namespace
}  // namespace trident::engine
