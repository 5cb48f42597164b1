// ZB-H1's activation memory against 1F1B's, from the schedules and the chunk plans (the plan
// training prints before step 1 and the planner sums). On every rank ZB-H1 plans exactly
// 1F1B's buffers plus, worked out here from the shapes alone:
//   (a) the activations W reads or keeps output gradients in (ln1 out, qkv, attention out,
//       residual after attention, ln2 out, fc1 out, GeLU out, and the layer output of all but
//       the chunk's last layer) for the micro-batches that are between their F and their W
//       beyond the rank's 1F1B slots, and
//   (b) one copy of the last layer's linear_fc2 output gradient (T h) per micro-batch
//       between its B and its W.
// Nothing else: no copy of any linear's input, no other output gradient. Rank 0 (the
// fullest in 1F1B) then plans 1F1B's memory plus one T h; the fullest ZB-H1 rank is within
// the edge buffers (embedding output, final LayerNorm and loss) of that.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "model/chunk_memory.h"
#include "parameters/parameter_layout.h"
#include "pipeline_parallel/schedules.h"

namespace trident {
namespace {

namespace pp = pipeline_parallel;

struct RankPlan {
  long activations = 0, total = 0;  // floats
  int slots = 0, deferred = 0, unfinished = 0;
};

RankPlan plan_rank(const ModelConfig& c, pp::ScheduleKind kind, int p, int m, int stage, int batch,
                   kernels::Precision precision) {
  const pp::ScheduleConfig sc{kind, p, 1, m};
  const auto ops = pp::build_schedule(sc, stage);
  RankPlan r;
  r.slots = pp::max_in_flight(ops, 1)[0];
  r.deferred = pp::max_deferred_weight_grads(ops, 1)[0];
  r.unfinished = pp::max_unfinished(ops, 1)[0];
  ChunkOptions o;
  const int per_stage = c.num_layers / p;
  o.placement = {stage * per_stage, per_stage, stage == 0, stage == p - 1};
  o.slots = r.slots, o.deferred_weight_grads = r.deferred, o.unfinished = r.unfinished;
  o.precision = precision;
  const MemoryPlan plan = plan_chunk_memory(chunk_shape(c, {0, 1}, batch, c.seq_length, o));
  for (const PlannedBuffer& b : plan.buffers())
    if (b.group == "activations") r.activations += b.total_floats();
  r.total = plan.total_bytes() / 4;
  return r;
}

TEST(ZeroBubbleMemory, PlansOneFOneBPlusTheHeldSetsAndOneOutputGradientCopy) {
  ModelConfig c;
  c.num_layers = 8, c.hidden_size = 64, c.num_attention_heads = 4, c.seq_length = 32;
  c.vocab_size = 300;
  const int batch = 2;
  const long T = (long)batch * c.seq_length, h = c.hidden_size;
  for (auto precision : {kernels::Precision::kFp32, kernels::Precision::kBf16})
    for (int p : {2, 4}) {
      const bool bf16 = precision == kernels::Precision::kBf16;
      auto gemm = [&](long n) { return bf16 ? (n + 1) / 2 : n; };  // bf16-stored operands
      const int layers = c.num_layers / p;
      // ln1 out, qkv, attention out, residual, ln2 out, fc1 out (pre-GeLU), GeLU out
      const long held_layer =
          gemm(T * h) + 3 * T * h + T * h + T * h + gemm(T * h) + 4 * T * h + gemm(4 * T * h);
      const long held_set = layers * held_layer + (layers - 1) * T * h;  // + layer outputs
      const long copies = gemm(T * h);  // the last layer's linear_fc2 dY
      const int m = 2 * p;
      long most_1f1b = 0, most_zb = 0, most_copies = 0;
      for (int s = 0; s < p; ++s) {
        RankPlan one = plan_rank(c, pp::ScheduleKind::kOneFOneB, p, m, s, batch, precision);
        RankPlan zb = plan_rank(c, pp::ScheduleKind::kZeroBubbleH1, p, m, s, batch, precision);
        ASSERT_EQ(zb.slots, one.slots);
        ASSERT_EQ(zb.unfinished, p);  // the paper's bound: p micro-batches from F to W
        const long expected =
            one.activations + (zb.unfinished - one.slots) * held_set + zb.deferred * copies;
        if (s == 0) EXPECT_EQ(zb.activations, one.activations + copies);
        EXPECT_EQ(zb.activations, expected) << "p=" << p << " rank " << s << " bf16 " << bf16;
        most_1f1b = std::max(most_1f1b, one.activations);
        most_zb = std::max(most_zb, zb.activations);
        most_copies = std::max(most_copies, zb.deferred * copies);
      }
      std::printf("p=%d %s: planned activations of the fullest rank, zb-h1 / 1f1b = %.4f\n", p,
                  bf16 ? "bf16" : "fp32", (double)most_zb / most_1f1b);
      // The fullest ZB-H1 rank: no more than 1F1B's fullest plus its dY copies and the one
      // slot's edge buffers (embedding output or final LayerNorm + loss) it may hold apart.
      const long edges = 4 * T * h;
      EXPECT_LE(most_zb, most_1f1b + most_copies + edges) << "p=" << p;
    }
}

// The planned bytes of every rank (all of a chunk's plan: parameters, optimizer state,
// activations, scratch) for the shapes of bench/pipeline_bubble.sh's real model and of
// gpt2-small's layers at seq 1024, printed for the README; the fullest ZB-H1 rank plans the
// fullest 1F1B rank's activations plus one T h output gradient at most.
TEST(ZeroBubbleMemory, BenchShapesPerRank) {
  struct Shape {
    const char* name;
    int layers, hidden, heads, seq;
  };
  for (const Shape& sh : {Shape{"12 layers h=256 s=128", 12, 256, 4, 128},
                          Shape{"4 layers h=768 s=1024", 4, 768, 12, 1024}}) {
    ModelConfig c;
    c.num_layers = sh.layers, c.hidden_size = sh.hidden, c.num_attention_heads = sh.heads;
    c.seq_length = sh.seq, c.vocab_size = 1024;
    for (int p : {2, 4}) {
      long most[2] = {0, 0};
      std::printf("%s p=%d m=%d, activations (total) MiB per rank:", sh.name, p, 2 * p);
      for (int s = 0; s < p; ++s) {
        RankPlan one =
            plan_rank(c, pp::ScheduleKind::kOneFOneB, p, 2 * p, s, 1, kernels::Precision::kFp32);
        RankPlan zb = plan_rank(c, pp::ScheduleKind::kZeroBubbleH1, p, 2 * p, s, 1,
                                kernels::Precision::kFp32);
        std::printf(" | 1f1b %.1f (%.1f) zb-h1 %.1f (%.1f)", one.activations / 262144.0,
                    one.total / 262144.0, zb.activations / 262144.0, zb.total / 262144.0);
        most[0] = std::max(most[0], one.activations), most[1] = std::max(most[1], zb.activations);
      }
      std::printf(" | fullest rank zb-h1 / 1f1b %.4f\n", (double)most[1] / most[0]);
      // One micro-batch's last-layer fc2 output gradient, T h floats, on rank 0.
      EXPECT_LE(most[1], most[0] + (long)sh.seq * sh.hidden) << sh.name << " p=" << p;
    }
  }
}

}  // namespace
}  // namespace trident

namespace trident {
namespace {

// A chunk's parameter sizes, taken from one and two layers (so that sizing 10^8 layers
// costs two small layouts), equal those of its whole parameter layout.
TEST(LayoutSizes, FromTwoLayersEqualTheWholeLayout) {
  ModelConfig llama;
  llama.num_layers = 7, llama.hidden_size = 64, llama.num_attention_heads = 4;
  llama.seq_length = 16, llama.vocab_size = 300;
  llama.normalization = "RMSNorm", llama.position_embedding_type = "rope";
  llama.num_query_groups = 2, llama.group_query_attention = true;
  ModelConfig gpt2 = llama;
  gpt2.normalization = "LayerNorm", gpt2.position_embedding_type = "learned_absolute";
  gpt2.group_query_attention = false;
  for (const ModelConfig& m : {gpt2, llama})
    for (int t : {1, 2})
      for (const ChunkPlacement& c :
           {ChunkPlacement{0, -1, true, true}, ChunkPlacement{0, 5, true, false},
            ChunkPlacement{2, 3, false, false}, ChunkPlacement{3, 4, false, true}}) {
        ParameterLayout whole(m, {0, t}, c);
        long largest = 0;
        for (const ParamSpec& s : whole.specs())
          if (s.local_shape.size() == 2) largest = std::max(largest, s.numel());
        const LayoutSizes sizes = layout_sizes(m, {0, t}, c);
        EXPECT_EQ(sizes.parameters, whole.total()) << m.normalization << " t " << t << " first "
                                                   << c.first_layer << " layers " << c.num_layers;
        EXPECT_EQ(sizes.largest_weight, largest);
      }
}

}  // namespace
}  // namespace trident
