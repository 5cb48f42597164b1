// The planner's model of one iteration against independent numbers: the PTD-P paper's
// parameter counts (its Table 1), FLOPs and training-time examples, the paper's bubble
// (p - 1) / (v m) for the simulated schedules, ring collectives worked by hand, and the
// memory plan of a chunk trident actually builds.
#include <gtest/gtest.h>

#include "comm/communicator.h"
#include "comm/placed_communicator.h"
#include "context_parallel/rules.h"
#include "engine/rank_buffers.h"
#include "engine/rank_model.h"
#include "engine/rank_plans.h"
#include "model/gpt_model.h"
#include "planner/collectives.h"
#include "planner/iteration_model.h"
#include "planner/layer_costs.h"
#include "planner/paper_model.h"
#include "train/training_config.h"

namespace trident::planner {
namespace {

struct PaperRow {
  long heads, hidden, layers;
  double billions;  // the paper's "Number of parameters (billion)"
};

// Narayanan et al. 2021, Table 1 (s = 2048, V = 51,200).
const PaperRow kTable1[] = {{24, 2304, 24, 1.7},      {32, 3072, 30, 3.6},
                            {32, 4096, 36, 7.5},      {48, 6144, 40, 18.4},
                            {64, 8192, 48, 39.1},     {80, 10240, 60, 76.1},
                            {96, 12288, 80, 145.6},   {128, 16384, 96, 310.1},
                            {128, 20480, 105, 529.6}, {160, 25600, 128, 1008.0}};

TEST(PlannerPaperModel, ParameterCountsOfTable1) {
  for (const PaperRow& r : kTable1) {
    double p = paper_parameter_count({r.layers, r.hidden, 51200, 2048});
    EXPECT_NEAR(p / 1e9, r.billions, 0.05) << "h = " << r.hidden;
  }
}

TEST(PlannerPaperModel, FlopsPerIteration) {
  // 1.7B model, B = 512: 96 B s l h^2 (1 + s/6h + V/16lh) worked by hand = 1.546683e16.
  GptShape small{24, 2304, 51200, 2048};
  EXPECT_NEAR(paper_flops_per_iteration(small, 512, true) / 1.546683e16, 1, 1e-6);
  EXPECT_NEAR(paper_flops_per_iteration(small, 512, false) / 1.178567e16, 1, 1e-6);
  // For the 1T model the paper approximates F by 8 B s P (6h >> s, 16lh >> V, 12lh >> V + s).
  GptShape large{128, 25600, 51200, 2048};
  double P = paper_parameter_count(large);
  EXPECT_NEAR(paper_flops_per_iteration(large, 3072, true) / (8.0 * 3072 * 2048 * P), 1, 0.02);
}

TEST(PlannerPaperModel, TrainingTimeExamplesOfSection5) {
  const double day = 86400;
  // GPT-3: 175B parameters, 300B tokens, 1024 A100s at 140 TFLOP/s: "about 34 days".
  EXPECT_NEAR(paper_training_seconds(300e9, 175e9, 1024, 140e12) / day, 34, 0.5);
  // 1T: 450B tokens, 3072 A100s at 163 TFLOP/s: "about 84 days".
  EXPECT_NEAR(paper_training_seconds(450e9, 1008e9, 3072, 163e12) / day, 84, 0.5);
}

TEST(PlannerCollectives, RingCostsWorkedByHand) {
  LinkSpec link{100, 10};  // 100 GB/s, 10 us
  // 1 GB over 8 ranks: 2 * 7/8 GB at 100 GB/s = 17.5 ms, plus 14 steps of 10 us.
  EXPECT_NEAR(ring_all_reduce_seconds(1e9, 8, link), 17.5e-3 + 140e-6, 1e-12);
  EXPECT_NEAR(ring_reduce_scatter_seconds(1e9, 8, link), 8.75e-3 + 70e-6, 1e-12);
  EXPECT_NEAR(point_to_point_seconds(1e6, link), 10e-6 + 10e-6, 1e-15);
  EXPECT_EQ(ring_all_reduce_seconds(1e9, 1, link), 0);
}

Cluster a100_node(int nodes) {
  Cluster c;
  c.nodes = nodes;
  c.device = {"A100", 312, 80, 2039};
  c.devices_per_node = 8;
  c.intra_node = {300, 5};
  c.inter_node = {25, 10};
  return c;
}

TEST(PlannerCollectives, GroupsInsideANodeUseItsLinks) {
  Cluster c = a100_node(4);
  EXPECT_EQ(&group_link(c, 8, 1), &c.intra_node);  // t = 8
  EXPECT_EQ(&group_link(c, 2, 4), &c.intra_node);  // d = 2 at stride t = 4
  EXPECT_EQ(&group_link(c, 4, 4), &c.inter_node);  // d = 4 at stride 4 spans two nodes
  EXPECT_EQ(&group_link(c, 2, 8), &c.inter_node);  // pipeline neighbours a node apart
}

Workload gpt(int layers, int hidden, int heads, int seq, long batch) {
  Workload w;
  w.model.num_layers = layers, w.model.hidden_size = hidden;
  w.model.num_attention_heads = heads, w.model.seq_length = seq;
  w.model.vocab_size = 51200;
  w.global_batch = batch;
  return w;
}

TEST(PlannerLayerCosts, ForwardFlopsPerLayerAreThePapers) {
  // One layer's forward: 24 b s h^2 (1 + s / (6h)) FLOPs, split over t; the output layer
  // 2 b s h V, run three times (logits, d(input), weight gradient).
  ModelConfig m;
  m.hidden_size = 1024, m.num_attention_heads = 16, m.seq_length = 512, m.vocab_size = 51200;
  for (int t : {1, 2, 8}) {
    LayerWork w = transformer_layer_work(m, t, 4);
    double flops = w.attention_flops;
    for (const Gemm& g : w.gemms) flops += g.flops();
    const double b = 4, s = 512, h = 1024;
    EXPECT_NEAR(flops / (24 * b * s * h * h * (1 + s / (6 * h)) / t), 1, 1e-12);
    HeadWork head = output_layer_work(m, t, 4);
    EXPECT_NEAR(head.chunks * head.logits.flops() / (2 * b * s * h * 51200 / t), 1, 1e-12);
    EXPECT_NEAR(head.logits_elements, b * s * 51200 / t, 1e-6);
  }
}

TEST(PlannerIterationModel, SimulatedBubbleIsThePapers) {
  IterationModel model(a100_node(1), gpt(8, 256, 4, 64, 64));
  for (int p : {2, 4, 8})
    for (int m : {p, 2 * p, 4 * p}) {
      EXPECT_NEAR(model.simulated_bubble(p, 1, m, 2.0), (p - 1.0) / m, 1e-9);  // 1F1B
      for (int v : {2, 4})
        EXPECT_NEAR(model.simulated_bubble(p, v, m, 2.0), (p - 1.0) / (v * m), 1e-9);
    }
  EXPECT_EQ(model.simulated_bubble(1, 1, 8, 2.0), 0);
}

// ZB-H1 (Qi et al. 2023) with F, B and W of equal length: (p - 1) idle units per rank over
// 3m units of work, a third of 1F1B's (p - 1)(tf + tb + tw) idle.
TEST(PlannerIterationModel, ZeroBubbleBubbleIsAThirdOfOneFOneBs) {
  IterationModel model(a100_node(1), gpt(8, 256, 4, 64, 64));
  for (int p : {2, 4, 8})
    for (int m : {p, 2 * p, 3 * p}) {
      pipeline_parallel::ScheduleConfig zb{pipeline_parallel::ScheduleKind::kZeroBubbleH1, p, 1, m};
      EXPECT_NEAR(model.simulated_bubble(zb, 1.0, 1.0), (p - 1.0) / (3 * m), 1e-9) << p << " " << m;
    }
}

// The same layout on ZB-H1: less bubble, so less time; the weight-gradient operands it keeps
// from B to W cost memory.
TEST(PlannerIterationModel, ZeroBubbleTradesMemoryForTheBubble) {
  Workload w = gpt(8, 512, 8, 256, 16);
  w.model.vocab_size = 1000;
  IterationModel model(a100_node(1), w);
  Layout one{1, 4, 1, 1, 1, Recompute::kNone}, zb = one;
  zb.zero_bubble = true;
  const Prediction a = model.predict(one), b = model.predict(zb);
  EXPECT_LT(b.bubble_fraction, 0.7 * a.bubble_fraction);  // W is under a third of the work here
  EXPECT_LT(b.time.total(), a.time.total());
  EXPECT_NEAR(b.time.compute, a.time.compute, 1e-12 * a.time.compute);
  EXPECT_GT(b.memory.total(), a.memory.total());
}

TEST(PlannerIterationModel, ComputeTimeIsThePapersFlopsAtTheGemmEfficiency) {
  Cluster c = a100_node(1);
  c.gemm.table = {{1, 0.5}, {2, 0.5}};  // flat: every GEMM at half of peak
  c.device.memory_bandwidth_gbs = 0;    // element-wise kernels and the optimizer take no time
  Workload w = gpt(4, 1024, 16, 512, 8);
  IterationModel model(c, w);
  GptShape shape{4, 1024, 51200, 512};
  for (Recompute r : {Recompute::kNone, Recompute::kFull}) {
    Layout l{1, 1, 1, 2, 1, r};
    Prediction p = model.predict(l);
    double flops = paper_flops_per_iteration(shape, 8, r == Recompute::kFull);
    EXPECT_NEAR((p.time.compute + p.time.other_kernels) * 312e12 * 0.5 / flops, 1, 1e-9);
    EXPECT_EQ(p.time.tensor_comm + p.time.pipeline_comm + p.time.bubble + p.time.data_comm, 0);
  }
}

// An MoE model's compute is the FLOPs of its active parameters (model/flops.h, Megatron's
// count: each token's k experts and the router) at the GEMM efficiency, under any EP; with
// full recomputation the layers' forward once more.
TEST(PlannerIterationModel, MoeComputeTimeIsTheActiveFlopsAtTheGemmEfficiency) {
  Cluster c = a100_node(1);
  c.gemm.table = {{1, 0.5}, {2, 0.5}};
  c.device.memory_bandwidth_gbs = 0;
  Workload w = gpt(4, 1024, 16, 512, 8);
  w.precision = kernels::Precision::kFp32;
  w.model.moe.num_experts = 8, w.model.moe.router_topk = 2, w.model.moe.ffn_hidden_size = 1536;
  w.model.moe.layer_pattern = {true, false, true, false};
  IterationModel model(c, w);
  const double B = 8, s = 512, h = 1024, V = 51200, layers = 4;
  // Per token and layer, forward: attention 8 h^2 + 4 s h; the MLP 16 h^2 (dense) or
  // k (2 h F + 2 F h) + 2 h E (MoE); the output layer 2 h V.
  const double attention = 8 * h * h + 4 * s * h;
  const double dense = 16 * h * h, moe = 2 * (2 * h * 1536 + 2 * 1536 * h) + 2 * h * 8;
  const double layer_fwd = B * s * (layers * attention + 2 * dense + 2 * moe);
  for (Recompute r : {Recompute::kNone, Recompute::kFull})
    for (int ep : {1, 2, 4}) {
      Layout l{1, 1, 4, 2, 1, r};
      l.expert = ep;
      ASSERT_TRUE(layout_violations(l, w).empty()) << layout_violations(l, w).front();
      const Prediction p = model.predict(l);
      const double flops = (r == Recompute::kFull ? 4 : 3) * layer_fwd + 3 * 2 * B * s * h * V;
      EXPECT_NEAR(p.model_flops / flops, 1, 1e-12);
      // One replica's share of the work (d = 4).
      EXPECT_NEAR((p.time.compute + p.time.other_kernels) * 312e12 * 0.5 / (flops / 4), 1, 1e-9)
          << ep;
    }
}

// EP > 1: each MoE layer's dispatch and combine, forward and backward, move the micro-batch's
// T k rows of h floats; an all-to-all sends (EP - 1) / EP of them in EP - 1 exchanges.
TEST(PlannerIterationModel, ExpertAllToAllsAreTheirBytesOverTheLink) {
  Workload w = gpt(4, 1024, 16, 512, 32);
  w.precision = kernels::Precision::kFp32;
  w.model.moe.num_experts = 8, w.model.moe.router_topk = 2;
  IterationModel model(a100_node(2), w);
  for (int ep : {1, 2, 4, 8}) {
    Layout l{1, 1, 16, 1, 1, Recompute::kNone};
    l.expert = ep;
    const Prediction p = model.predict(l);
    const double bytes = 512.0 * 2 * 1024 * 4;  // T k h fp32
    const LinkSpec& link = ep <= 8 ? model.cluster().intra_node : model.cluster().inter_node;
    const double one = ep == 1 ? 0
                               : (ep - 1.0) / ep * bytes / (link.bandwidth_gbs * 1e9) +
                                     (ep - 1) * link.latency_us * 1e-6;
    const int microbatches = 32 / 16;
    EXPECT_NEAR(p.time.expert_comm, microbatches * 4 * 4 * one, 1e-12) << ep;
  }
  Layout across{1, 1, 16, 1, 1, Recompute::kNone};
  across.expert = 16;  // two nodes of 8
  Workload w16 = w;
  w16.model.moe.num_experts = 16;
  IterationModel two_nodes(a100_node(2), w16);
  const double bytes = 512.0 * 2 * 1024 * 4;
  const LinkSpec& ib = two_nodes.cluster().inter_node;
  EXPECT_NEAR(
      two_nodes.predict(across).time.expert_comm,
      2 * 4 * 4 * (15.0 / 16 * bytes / (ib.bandwidth_gbs * 1e9) + 15 * ib.latency_us * 1e-6),
      1e-12);
}

// The expert buffer's gradients are all-reduced over the d/EP expert-data ranks only (the
// dense ones over d): per rank 2 (n - 1) / n of each buffer's bytes (no sharding).
TEST(PlannerIterationModel, ExpertGradientsAreReducedOverTheExpertDataGroup) {
  Workload w = gpt(4, 256, 8, 128, 16);
  w.precision = kernels::Precision::kFp32;
  w.model.moe.num_experts = 8, w.model.moe.router_topk = 2;
  IterationModel model(a100_node(1), w);
  for (int ep : {1, 2, 4, 8}) {
    Layout l{1, 1, 8, 1, 1, Recompute::kNone};
    l.expert = ep;
    const StageParameters params = model.stage_parameters(l, 0);
    EXPECT_EQ(params.expert_floats > 0, ep > 1);
    const double n = 8.0 / ep;
    const double want =
        2 * 7.0 / 8 * params.floats * 4 + 2 * (n - 1) / n * params.expert_floats * 4;
    EXPECT_NEAR(model.predict(l).data_parallel_bytes / want, 1, 1e-9) << ep;
  }
}

// Each micro-batch adds its weight gradients into the accumulated ones: in bf16 a fresh fp32
// gradient is written, then read with the sum, which is rewritten (16 bytes per weight
// element); the output layer adds once per row chunk. More micro-batches of the same global
// batch pay it more often.
TEST(PlannerIterationModel, EveryMicroBatchAddsItsWeightGradients) {
  Cluster c = a100_node(1);
  c.device.memory_bandwidth_gbs = 100;
  c.kernels.attention_efficiency = 0.5;  // the attention core's time does not depend on b
  c.kernels.separate_gradient_accumulation = true;
  Workload w = gpt(4, 1024, 16, 512, 8);
  w.precision = kernels::Precision::kBf16;
  IterationModel model(c, w);
  Layout few{1, 1, 1, 8, 1, Recompute::kNone}, many = few;
  many.micro_batch = 1;
  const double h = 1024, V = 51200;  // V is already a multiple of 128
  const double layer_bytes = 12 * h * h * 16;
  // b = 8: 4096 rows; 7 chunks of max(512, 2^25 / V) = 655 rows would hold fewer than h, and
  // h V = 2^20 x 50 is under 2^26 floats, so 4096 / h = 4 chunks of 1024 rows: each writes its
  // weight gradient fresh and adds it (16 bytes per element). b = 1: one chunk of 512 rows,
  // fewer than h: the product adds in place (8 bytes per element).
  const double few_bytes = 4 * layer_bytes + 4 * V * h * 16;
  const double many_bytes = 8 * (4 * layer_bytes + V * h * 8);
  const double extra =
      model.predict(many).time.other_kernels - model.predict(few).time.other_kernels;
  EXPECT_NEAR(extra, (many_bytes - few_bytes) / 100e9, 1e-6 * extra);
  // Fused into the products (GPUs, Megatron's --gradient-accumulation-fusion): no extra time.
  c.kernels.separate_gradient_accumulation = false;
  IterationModel fused(c, w);
  EXPECT_NEAR(fused.predict(many).time.other_kernels, fused.predict(few).time.other_kernels, 1e-12);
}

// The last stage also runs the output layer and the loss: with a vocabulary that dwarfs the
// layers, the pipeline moves at the last stage's pace and the first stage idles; the bubble
// of the busiest stage is far below the equal-stage (p - 1) / m.
TEST(PlannerIterationModel, TheOutputLayerMakesTheLastStageTheSlowest) {
  Workload w = gpt(4, 256, 4, 256, 16);
  w.model.vocab_size = 256000;
  Cluster c = a100_node(1);
  c.gemm.table = {{1, 0.5}, {2, 0.5}};  // every product at half of peak: the FLOPs decide
  c.kernels.attention_efficiency = 0.5;
  IterationModel model(c, w);
  Layout one{1, 1, 1, 1, 1, Recompute::kNone}, two = one;
  two.pipeline = 2;
  const Prediction a = model.predict(one), b = model.predict(two);
  EXPECT_LT(b.bubble_fraction, 0.25 * (2 - 1.0) / 16);
  EXPECT_GT(b.time.total(), 0.8 * a.time.total());  // p = 2 cannot halve the output layer
}

TEST(PlannerIterationModel, TimesTheBalancedSplitTrainingRuns) {
  // gpt2-small at s = 256: a layer 14.94 MFLOP per token forward, the output layer 77.27 (5.17
  // layers). Training's default at p = 2 is 9 | 3 + 5.17 (engine/pipeline_split.h): the
  // busiest stage 9 of 17.17 layers' work, 0.52 of one stage's time, where the even 6 | 6 +
  // 5.17 would leave 0.65; 16 micro-batches add a bubble of about 1/16.
  Workload w = gpt(12, 768, 12, 256, 16);
  w.model.vocab_size = 50257;
  Cluster c = a100_node(1);
  c.gemm.table = {{1e-6, 0.5}, {1e6, 0.5}};  // every product at half of peak: the FLOPs decide
  c.kernels.attention_efficiency = 0.5;
  c.device.memory_bandwidth_gbs = 1e9;  // element-wise kernels, the softmax: next to nothing
  IterationModel model(c, w);
  Layout one{1, 1, 1, 1, 1, Recompute::kNone}, two = one;
  two.pipeline = 2;
  EXPECT_EQ(model.rank_layout(two).split, (std::vector<int>{9, 3}));
  const double ratio = model.predict(two).time.total() / model.predict(one).time.total();
  EXPECT_GT(ratio, 0.52);
  EXPECT_LT(ratio, 0.6);
}

TEST(PlannerIterationModel, MemoryIsThePlanOfTheChunkTridentBuilds) {
  Workload w = gpt(2, 128, 4, 32, 4);
  w.model.vocab_size = 1000;
  w.precision = kernels::Precision::kBf16;
  IterationModel model(a100_node(1), w);
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    Layout l{1, 1, 1, 2, 1, r};
    ChunkOptions o;
    o.precision = kernels::Precision::kBf16;
    o.recompute_layers = r == Recompute::kFull ? 2 : 0;
    o.recompute_attention = r == Recompute::kSelective;
    comm::SingleRankCommunicator tp("tensor");
    GPTModel built(w.model, tp, 2, 32, o);
    EXPECT_DOUBLE_EQ(model.device_memory(l).total(), (double)built.memory_plan().total_bytes());
  }
}

TEST(PlannerIterationModel, DistributedOptimizerShardsTheMoments) {
  Workload w = gpt(8, 1024, 16, 512, 64);
  IterationModel model(a100_node(1), w);
  Layout plain{1, 1, 8, 1, 1, Recompute::kNone}, sharded = plain;
  sharded.sharding = data_parallel::ShardingStrategy::kOptim;
  MemoryBreakdown a = model.device_memory(plain), b = model.device_memory(sharded);
  EXPECT_NEAR(b.optimizer / a.optimizer, 1.0 / 8, 1e-4);  // 8 bytes per parameter -> 1 + 1/d
  EXPECT_NEAR(a.optimizer, 2 * a.gradients, 64);
  EXPECT_EQ(a.activations, b.activations);
}

// Context parallelism, against the paper's FLOPs and Megatron's arithmetic: c ranks share
// each sample's FLOPs (the load-balanced chunks: 1/c of the causal attention each), every
// activation is of seq / c tokens, and the replicated weights' gradients are all-reduced over
// the d x c ranks (2 (n - 1) / n of the buffer each).
TEST(PlannerIterationModel, ContextParallelRanksShareEachSamplesWork) {
  Cluster c = a100_node(1);
  c.gemm.table = {{1, 0.5}, {2, 0.5}};  // flat: every GEMM at half of peak
  c.device.memory_bandwidth_gbs = 0;    // element-wise kernels and the optimizer take no time
  Workload w = gpt(4, 1024, 16, 8192, 8);
  w.precision = kernels::Precision::kFp32;
  IterationModel model(c, w);
  const double flops = paper_flops_per_iteration({4, 1024, 51200, 8192}, 8, false);
  const MemoryBreakdown one = model.device_memory(Layout{1, 1, 1, 1, 1, Recompute::kNone});
  for (int cp : {1, 2, 4, 8}) {
    Layout l{1, 1, 1, 1, 1, Recompute::kNone};
    l.context = cp;
    const Prediction p = model.predict(l);
    EXPECT_NEAR((p.time.compute + p.time.other_kernels) * 312e12 * 0.5 * cp / flops, 1, 1e-9) << cp;
    EXPECT_NEAR(p.memory.activations * cp / one.activations, 1, 1e-9) << cp;
    EXPECT_EQ(p.time.context_comm > 0, cp > 1) << cp;
    // Per layer and micro-batch forward (c - 1) blocks of seq / c tokens' K and V (h = 1024,
    // fp32), backward c - 1 blocks and c gradients.
    const double block = 8192.0 / cp * 2 * 1024 * 4;
    EXPECT_DOUBLE_EQ(p.context_bytes, 8 * 4 * (3.0 * cp - 2) * block * (cp > 1)) << cp;
  }
  // d = 2 x c = 2: the gradients all-reduced over 4 ranks, as at d = 4.
  Layout l{1, 1, 2, 1, 1, Recompute::kNone};
  l.context = 2;
  const StageParameters params = model.stage_parameters(l, 0);
  EXPECT_NEAR(model.predict(l).data_parallel_bytes / (2 * 3.0 / 4 * params.floats * 4), 1, 1e-9);
  // The distributed optimizer shards the moments over d x c.
  Layout sharded{1, 1, 1, 1, 1, Recompute::kNone, data_parallel::ShardingStrategy::kOptim};
  sharded.context = 4;
  EXPECT_NEAR(model.device_memory(sharded).optimizer / one.optimizer, 1.0 / 4, 1e-4);
}

// The ring's overlap: on a link fast enough only the last gradient's trip home is left; on a
// slow one the exposed time grows with the bytes.
TEST(PlannerIterationModel, RingTrafficHidesBehindAttentionOnAFastLink) {
  Workload w = gpt(4, 1024, 16, 16384, 4);
  Cluster fast = a100_node(1), slow = fast;
  fast.intra_node = {1e6, 0};
  slow.intra_node = {1, 0};
  Layout l{1, 1, 1, 1, 1, Recompute::kNone};
  l.context = 4;
  const Prediction hidden = IterationModel(fast, w).predict(l);
  const Prediction exposed = IterationModel(slow, w).predict(l);
  const double block = 16384.0 / 4 * 2 * 1024 * 4;                     // one block's bytes
  EXPECT_NEAR(hidden.time.context_comm, 4 * 4 * block / 1e15, 1e-12);  // m x layers x home trip
  EXPECT_GT(exposed.time.context_comm, 4 * 4 * 7 * block / 1e9 * 0.5);
}

TEST(PlannerIterationModel, OneFOneBHoldsPMicroBatchesOnTheFirstStage) {
  Workload w = gpt(8, 256, 4, 64, 8);
  w.model.vocab_size = 1000;  // the layers, not the output layer, dominate
  IterationModel model(a100_node(1), w);
  Layout l1{1, 4, 1, 1, 1, Recompute::kNone}, l2 = l1;
  l2.pipeline = 2;  // half the stages: half the micro-batches in flight, twice the layers
  MemoryBreakdown a = model.device_memory(l1), b = model.device_memory(l2);
  EXPECT_EQ(a.stage, 0);
  // Layer activations per device: in flight (p) x layers per stage (8 / p) is the same.
  EXPECT_NEAR(a.activations / b.activations, 1.0, 0.1);
}

TEST(RankBuffers, SendCopiesTiedEmbeddingAndMpiTemporaries) {
  engine::RankBufferShape s;
  s.stages = 2, s.chunks = 2, s.microbatches = 4;
  s.boundary_floats = 100, s.tied_embedding_floats = 1000, s.gradient_floats = 5000;
  s.data = 2, s.overlap_grad_reduce = true;
  // Stage 0 sends backward from its second chunk only (virtual stage 2), 4 micro-batches.
  EXPECT_EQ(engine::plan_rank_buffers(s).total_bytes(), 4L * (4 * 100 + 1000 + 5000));
  s.stage = 1;  // both chunks send backward
  EXPECT_EQ(engine::plan_rank_buffers(s).total_bytes(), 4L * (8 * 100 + 1000 + 5000));
  s.stages = 1, s.chunks = 1, s.stage = 0, s.overlap_grad_reduce = false;
  EXPECT_EQ(engine::plan_rank_buffers(s).total_bytes(), 0);
  s.reduction_cap_floats = 1200;  // sharded gradients: a few buckets in flight, overlap or not
  EXPECT_EQ(engine::plan_rank_buffers(s).total_bytes(), 4L * 1200);
  s.data = 1;
  EXPECT_EQ(engine::plan_rank_buffers(s).total_bytes(), 0);
}

// The planner's plan of a pipeline stage's rank against the plan training prints for that
// rank: the chunks trident actually builds from the same flags (each rank of the layout
// built in turn in this process, with stand-in communicators), buffer by buffer.
namespace plan_vs_training {

ModelConfig small_model(bool llama, bool tied) {
  ModelConfig m;
  m.num_layers = 8, m.hidden_size = 64, m.num_attention_heads = 4, m.seq_length = 32;
  m.vocab_size = 500;
  if (llama) {
    m.normalization = "RMSNorm", m.position_embedding_type = "rope", m.swiglu = true;
    m.ffn_hidden_size = 176, m.group_query_attention = true, m.num_query_groups = 2;
    m.disable_bias_linear = true;
  }
  m.untie_embeddings_and_output_weights = !tied;
  return m;
}

// The flags --launch would pass for this layout (uniform recomputation of single layers,
// overlapped reduction when d > 1).
train::TrainingConfig training_config(const Layout& l, const Workload& w) {
  train::TrainingConfig c;
  c.model = w.model;
  c.tensor_model_parallel_size = l.tensor, c.pipeline_model_parallel_size = l.pipeline;
  c.world_size = (int)l.devices();
  c.num_layers_per_virtual_pipeline_stage =
      l.virtual_stages > 1 ? w.model.num_layers / (l.pipeline * l.virtual_stages) : 0;
  c.micro_batch_size = l.micro_batch;
  c.global_batch_size = (int)w.global_batch;
  c.bf16 = w.precision == kernels::Precision::kBf16;
  // ZeRO-1 by Megatron's flag, ZeRO-2 by its strategy name (as --launch passes them).
  c.use_distributed_optimizer = l.sharding == data_parallel::ShardingStrategy::kOptim;
  if (data_parallel::shards_gradients(l.sharding))
    c.data_parallel_sharding_strategy = data_parallel::sharding_strategy_name(l.sharding);
  c.overlap_grad_reduce = l.replicas() > 1;
  c.sequence_parallel = l.sequence_parallel;
  c.context_parallel_size = l.context;
  c.cp_comm_type = context_parallel::cp_comm_type_name(l.cp_comm_type);
  if (l.recompute != Recompute::kNone) {
    c.recompute_granularity = l.recompute == Recompute::kFull ? "full" : "selective";
    if (l.recompute == Recompute::kFull) c.recompute_method = "uniform", c.recompute_num_layers = 1;
  }
  if (l.zero_bubble) c.pipeline_schedule = "zb-h1";
  c.expert_model_parallel_size = l.expert;
  c.mock_data = true;
  return c;
}

void expect_same_plans(const Layout& l, const Workload& w) {
  const train::TrainingConfig c = training_config(l, w);
  ASSERT_EQ(train::validate_training_config(c), std::vector<std::string>{}) << l.describe();
  IterationModel planner(load_cluster(TRIDENT_SOURCE_DIR "/clusters/this-machine.toml"), w);
  for (int stage = 0; stage < l.pipeline; ++stage) {
    testing::PlacedCommunicator tp(0, l.tensor), pp(stage, l.pipeline), dp(0, l.replicas());
    testing::PlacedCommunicator expert(0, l.expert), expert_data(0, l.data / l.expert);
    testing::PlacedCommunicator context(0, l.context);
    engine::RankModel rank = engine::build_rank_model(c.rank_model_options(), tp, pp, dp, nullptr,
                                                      &expert, &expert_data, &context);
    const std::vector<const MemoryPlan*> printed = testing::printed_plans(rank);
    const std::vector<MemoryPlan> planned = planner.stage_plans(l, stage);
    std::vector<const MemoryPlan*> planned_pointers;
    for (const MemoryPlan& plan : planned) planned_pointers.push_back(&plan);
    EXPECT_EQ(testing::plan_entries(planned_pointers), testing::plan_entries(printed))
        << l.describe() << " stage " << stage;
  }
}

TEST(PlannerMemory, EqualsThePlanTrainingPrintsForEveryStage) {
  for (bool llama : {false, true})
    for (bool tied : {true, false})
      for (auto [p, v] : {std::pair{1, 1}, {2, 1}, {2, 2}, {4, 1}, {4, 2}}) {
        Workload w{small_model(llama, tied), 8, kernels::Precision::kFp32};
        Layout l;
        l.pipeline = p, l.virtual_stages = v, l.micro_batch = 2;
        expect_same_plans(l, w);
      }
}

TEST(PlannerMemory, EqualsTrainingWithTensorDataAndOptions) {
  for (bool llama : {false, true}) {
    Workload w{small_model(llama, !llama), 16, kernels::Precision::kBf16};
    Layout l;
    l.tensor = 2, l.pipeline = 2, l.data = 2, l.micro_batch = 2;
    l.sharding = data_parallel::ShardingStrategy::kOptim, l.sequence_parallel = true;
    for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      l.recompute = r;
      expect_same_plans(l, w);
    }
    l.recompute = Recompute::kNone, l.sequence_parallel = false, l.zero_bubble = true;
    expect_same_plans(l, w);
  }
}

// ZeRO-2: the gradient buffer holds this rank's shard and the buckets being filled and
// reduced, MPI's temporaries are capped; the planner's plan is training's, buffer by buffer.
TEST(PlannerMemory, EqualsTrainingWithShardedGradients) {
  for (bool llama : {false, true}) {
    Workload w{small_model(llama, !llama), 16, kernels::Precision::kBf16};
    Layout l;
    l.sharding = data_parallel::ShardingStrategy::kOptimGrads;
    for (auto [t, p, d] : {std::tuple{1, 1, 4}, {2, 2, 2}, {1, 2, 4}}) {
      l.tensor = t, l.pipeline = p, l.data = d, l.micro_batch = 2;
      expect_same_plans(l, w);
    }
  }
}

// Qwen2 (q/k/v biases only) and Qwen3 (q/k norms and their kept inputs, heads 24 wide
// against hidden / heads = 16) on the Llama block.
TEST(PlannerMemory, EqualsTrainingForQwen) {
  for (bool qwen3 : {false, true}) {
    ModelConfig m = small_model(true, true);
    m.add_qkv_bias = !qwen3, m.qk_layernorm = qwen3, m.kv_channels = qwen3 ? 24 : 0;
    Workload w{m, 16, kernels::Precision::kBf16};
    Layout l;
    l.tensor = 2, l.pipeline = 2, l.data = 2, l.micro_batch = 2, l.sequence_parallel = true;
    for (Recompute r : {Recompute::kNone, Recompute::kFull}) {
      l.recompute = r;
      expect_same_plans(l, w);
    }
    l.recompute = Recompute::kNone, l.sequence_parallel = false, l.zero_bubble = true;
    expect_same_plans(l, w);
  }
}

// MoE (every other layer, 4 experts top-2): the planned memory is training's under expert
// parallelism too, the E/EP experts of the expert buffer and their sharded Adam state
// included.
TEST(PlannerMemory, EqualsTrainingForMoe) {
  for (bool llama : {false, true}) {
    ModelConfig m = small_model(llama, true);
    m.moe.num_experts = 4, m.moe.router_topk = 2, m.moe.ffn_hidden_size = 48;
    m.moe.layer_pattern = std::vector<bool>(m.num_layers, false);
    for (int layer = 0; layer < m.num_layers; layer += 2) m.moe.layer_pattern[layer] = true;
    Workload w{m, 16, kernels::Precision::kFp32};
    for (int ep : {1, 2, 4}) {
      Layout l;
      l.pipeline = 2, l.data = 4, l.micro_batch = 2, l.expert = ep;
      for (auto sharding :
           {data_parallel::ShardingStrategy::kNoShard, data_parallel::ShardingStrategy::kOptim}) {
        l.sharding = sharding;
        expect_same_plans(l, w);
      }
    }
    Layout tp;
    tp.tensor = 2, tp.data = 2, tp.micro_batch = 2, tp.expert = 2, tp.sequence_parallel = true;
    expect_same_plans(tp, w);
    // bf16 (the MoE scratch's bf16 operands, the expert buffer's bf16 copy) and zb-h1.
    Workload bf16 = w;
    bf16.precision = kernels::Precision::kBf16;
    Layout zb;
    zb.pipeline = 2, zb.data = 2, zb.micro_batch = 2, zb.expert = 2, zb.zero_bubble = true;
    for (const Layout& l : {tp, zb}) expect_same_plans(l, bf16);
  }
}

// zb-h1 with MoE layers: W holds only their attention's weight gradients (the MoE MLP forms
// its own in B), so W is shorter and B longer than the dense split would make them, with the
// same compute; the bubble still shrinks, less than for the dense model.
TEST(PlannerIterationModel, ZeroBubbleWOfAnMoeLayerIsItsAttentionsWeightGradients) {
  Workload w = gpt(8, 512, 8, 256, 16);
  w.model.vocab_size = 1000;
  const LayerWork dense = transformer_layer_work(w.model, 1, 1);
  w.model.moe.num_experts = 4, w.model.moe.router_topk = 2;
  const LayerWork moe = moe_layer_work(w.model, 1, 1, false, 1);
  EXPECT_EQ(dense.deferred_gemms, -1);  // all of a dense layer's
  ASSERT_EQ(moe.deferred_gemms, 2);     // qkv and proj, the attention's
  EXPECT_EQ(moe.gemms[0].flops(), dense.gemms[0].flops());
  EXPECT_EQ(moe.gemms[1].flops(), dense.gemms[1].flops());
  IterationModel model(a100_node(1), w);
  Layout one{1, 4, 1, 1, 1, Recompute::kNone}, zb = one;
  zb.zero_bubble = true;
  const Prediction a = model.predict(one), b = model.predict(zb);
  EXPECT_NEAR(b.time.compute, a.time.compute, 1e-12 * a.time.compute);
  EXPECT_LT(b.bubble_fraction, a.bubble_fraction);
  Workload dense_w = w;
  dense_w.model.moe = MoeConfig{};
  IterationModel dense_model(a100_node(1), dense_w);
  const Prediction c = dense_model.predict(one), d = dense_model.predict(zb);
  // W is a smaller share of an MoE layer's backward: less of the bubble is filled.
  EXPECT_GT(b.bubble_fraction / a.bubble_fraction, d.bubble_fraction / c.bubble_fraction);
}

// LoRA (--lora-rank 4, with --lora-dropout): the frozen base's weights without gradient or
// Adam rows, the adapters' three rows, the branches' scratch; as training plans them.
TEST(PlannerMemory, EqualsTrainingForLora) {
  for (bool llama : {false, true}) {
    ModelConfig m = small_model(llama, true);
    m.lora.rank = 4, m.lora.dropout = 0.1f;
    Workload w{m, 16, kernels::Precision::kFp32};
    Layout l;
    l.tensor = 2, l.pipeline = 2, l.data = 2, l.micro_batch = 2, l.sequence_parallel = true;
    expect_same_plans(l, w);
    l.sequence_parallel = false, l.sharding = data_parallel::ShardingStrategy::kOptim;
    expect_same_plans(l, w);
    IterationModel planner(load_cluster(TRIDENT_SOURCE_DIR "/clusters/this-machine.toml"), w);
    const MemoryBreakdown lora = planner.device_memory(l);
    w.model.lora = LoraConfig{};
    const MemoryBreakdown full =
        IterationModel(load_cluster(TRIDENT_SOURCE_DIR "/clusters/this-machine.toml"), w)
            .device_memory(l);
    EXPECT_LT(lora.gradients, full.gradients / 10) << "the base has no gradients";
    EXPECT_LT(lora.optimizer, full.optimizer / 10) << "nor Adam state";
  }
}

// The planner's plan of a cp layout is the one training prints (each chunk planned for
// seq / c tokens, the moments sharded over d x c), for each cp path.
TEST(PlannerMemory, EqualsTrainingWithContextParallelism) {
  for (bool llama : {false, true})
    for (auto type : {context_parallel::CpCommType::kP2p, context_parallel::CpCommType::kA2a,
                      context_parallel::CpCommType::kAllGather}) {
      Workload w{small_model(llama, !llama), 16, kernels::Precision::kBf16};
      Layout l;
      l.context = 2, l.data = 2, l.pipeline = 2, l.micro_batch = 2, l.cp_comm_type = type;
      l.sharding = data_parallel::ShardingStrategy::kOptim;
      expect_same_plans(l, w);
      l.context = 4, l.cp_comm_type = context_parallel::CpCommType::kP2p, l.tensor = 2;
      expect_same_plans(l, w);
    }
}

}  // namespace plan_vs_training

}  // namespace
}  // namespace trident::planner
