// The layout search and `trident plan` end to end: given dimensions stay fixed, tensor
// groups stay inside a node, layouts over memory are set aside, plans come fastest first,
// the JSON has exactly the issue's keys, and impossible requests say why with the closest
// thing that fits.
#include <gtest/gtest.h>

#include <array>
#include <nlohmann/json.hpp>
#include <set>

#include "planner/report.h"
#include "planner/search.h"
#include "test_util.h"

namespace trident::planner {
namespace {

Cluster cluster(int nodes, int per_node, double memory_gib) {
  Cluster c;
  c.source = "test.toml";
  c.nodes = nodes;
  c.device = {"X", 100, memory_gib, 1000};
  c.devices_per_node = per_node;
  c.intra_node = {100, 5};
  c.inter_node = {10, 10};
  return c;
}

Workload small_gpt(long batch = 32) {
  Workload w;
  w.model.num_layers = 8, w.model.hidden_size = 512, w.model.num_attention_heads = 8;
  w.model.seq_length = 256, w.model.vocab_size = 1000;
  w.global_batch = batch;
  return w;
}

TEST(PlannerSearch, FastestFirstAllWithinMemoryAndTensorInsideANode) {
  IterationModel model(cluster(4, 4, 80), small_gpt());
  SearchResult r = search_layouts(model, {16});
  ASSERT_GT(r.fitting.size(), 10u);
  EXPECT_EQ(r.timed, (long)r.fitting.size());
  EXPECT_EQ(r.evaluated, (long)(r.fitting.size() + r.over_memory.size()));
  for (size_t i = 0; i < r.fitting.size(); ++i) {
    const Prediction& p = r.fitting[i];
    EXPECT_EQ(p.layout.devices(), 16);
    EXPECT_LE(p.layout.tensor, 4);
    EXPECT_TRUE(p.fits);
    if (i) EXPECT_LE(r.fitting[i - 1].time.total(), p.time.total());
  }
}

TEST(PlannerSearch, GivenDimensionsAreFixed) {
  IterationModel model(cluster(2, 8, 80), small_gpt());
  SearchOptions o{16};
  o.tensor = 2, o.pipeline = 2, o.micro_batch = 2, o.layers_per_virtual_stage = 2;
  o.recompute = Recompute::kFull;
  SearchResult r = search_layouts(model, o);
  ASSERT_FALSE(r.fitting.empty());
  for (const Prediction& p : r.fitting) {
    EXPECT_EQ(p.layout.tensor, 2);
    EXPECT_EQ(p.layout.pipeline, 2);
    EXPECT_EQ(p.layout.data, 4);
    EXPECT_EQ(p.layout.micro_batch, 2);
    EXPECT_EQ(p.layout.virtual_stages, 2);  // 8 layers / (p = 2 x 2 layers per chunk)
    EXPECT_EQ(p.layout.recompute, Recompute::kFull);
  }
}

TEST(PlannerSearch, OverMemoryIsSetAsideAndRecomputationMakesRoom) {
  Workload w = small_gpt(64);
  w.model.seq_length = 2048;
  IterationModel roomy(cluster(1, 4, 80), w);
  SearchResult all = search_layouts(roomy, {4});
  // Capacity between the smallest and the largest layout's memory.
  const double gib = 1L << 30;
  double smallest = 1e300, largest = 0;
  for (const Prediction& p : all.fitting) {
    smallest = std::min(smallest, p.memory.total());
    largest = std::max(largest, p.memory.total());
  }
  const double capacity = (smallest + largest) / 2;
  IterationModel tight(cluster(1, 4, capacity / gib), w);
  SearchResult r = search_layouts(tight, {4});
  ASSERT_FALSE(r.fitting.empty());
  ASSERT_FALSE(r.over_memory.empty());
  for (const Prediction& p : r.fitting) EXPECT_LE(p.memory.total(), capacity);
  for (const Prediction& p : r.over_memory) EXPECT_GT(p.memory.total(), capacity);
  EXPECT_EQ(r.fitting.size() + r.over_memory.size(), all.fitting.size());
}

TEST(PlannerSearch, SequenceParallelIsSearchedOnlyWithTensorParallelism) {
  IterationModel model(cluster(1, 4, 80), small_gpt());
  SearchOptions o{4};
  SearchResult r = search_layouts(model, o);
  long with_sp = 0;
  for (const Prediction& p : r.fitting) {
    if (p.layout.sequence_parallel) EXPECT_GT(p.layout.tensor, 1) << p.layout.describe();
    with_sp += p.layout.sequence_parallel;
  }
  EXPECT_GT(with_sp, 0);
  o.sequence_parallel = false;
  for (const Prediction& p : search_layouts(model, o).fitting)
    EXPECT_FALSE(p.layout.sequence_parallel);
  o.sequence_parallel = true;
  for (const Prediction& p : search_layouts(model, o).fitting)
    EXPECT_TRUE(p.layout.sequence_parallel && p.layout.tensor > 1);
}

TEST(PlannerSearch, ZeroBubbleOnlyWithAPipelineOfOneChunkPerRank) {
  IterationModel model(cluster(1, 4, 80), small_gpt());
  SearchOptions o{4};
  long zb = 0;
  for (const Prediction& p : search_layouts(model, o).fitting) {
    if (p.layout.zero_bubble)
      EXPECT_TRUE(p.layout.pipeline > 1 && p.layout.virtual_stages == 1) << p.layout.describe();
    zb += p.layout.zero_bubble;
  }
  EXPECT_GT(zb, 0);
  o.zero_bubble = true;
  SearchResult fixed = search_layouts(model, o);
  ASSERT_FALSE(fixed.fitting.empty());
  for (const Prediction& p : fixed.fitting) EXPECT_TRUE(p.layout.zero_bubble);
}

// ZeRO-0 to 3 are searched where d > 1; sharded gradients never with ZB-H1, whose deferred
// weight gradients come after the reduce-scatter.
TEST(PlannerSearch, ShardingStrategiesAreSearchedWhereTheyCanRun) {
  using data_parallel::ShardingStrategy;
  IterationModel model(cluster(1, 4, 80), small_gpt());
  SearchOptions o{4};
  std::set<ShardingStrategy> searched;
  for (const Prediction& p : search_layouts(model, o).fitting) {
    searched.insert(p.layout.sharding);
    if (p.layout.data == 1) EXPECT_EQ(p.layout.sharding, ShardingStrategy::kNoShard);
    if (data_parallel::shards_gradients(p.layout.sharding))
      EXPECT_FALSE(p.layout.zero_bubble) << p.layout.describe();
  }
  EXPECT_EQ(searched, (std::set<ShardingStrategy>{
                          ShardingStrategy::kNoShard, ShardingStrategy::kOptim,
                          ShardingStrategy::kOptimGrads, ShardingStrategy::kOptimGradsParams}));
  o.sharding = ShardingStrategy::kOptimGradsParams;
  SearchResult zero3 = search_layouts(model, o);
  ASSERT_FALSE(zero3.fitting.empty());
  for (const Prediction& p : zero3.fitting) {
    EXPECT_EQ(p.layout.sharding, ShardingStrategy::kOptimGradsParams);
    EXPECT_GT(p.layout.data, 1) << p.layout.describe();
    EXPECT_NE(p.layout.describe().find(" zero-3"), std::string::npos);
  }
}

// A model whose weights fit 4 devices only when sharded (ZeRO-3): 3 heads and 7 layers leave
// t = 1 and p = 1 on a node of 4, so d = 4; the devices hold less than any ZeRO-2 layout needs
// and more than the largest ZeRO-3 one. The search picks ZeRO-3, and only ZeRO-3 fits.
TEST(PlannerSearch, PicksZeroThreeWhereNothingElseFits) {
  using data_parallel::ShardingStrategy;
  Workload w;
  w.model.num_layers = 7, w.model.hidden_size = 768, w.model.num_attention_heads = 3;
  w.model.seq_length = 32, w.model.vocab_size = 1000;
  w.global_batch = 4;
  IterationModel probe(cluster(1, 4, 80), w);
  auto gib = [&](ShardingStrategy s, Recompute r) {
    return probe.device_memory(Layout{1, 1, 4, 1, 1, r, s}).total() / (1L << 30);
  };
  const double zero2 = gib(ShardingStrategy::kOptimGrads, Recompute::kFull);
  const double zero3 = gib(ShardingStrategy::kOptimGradsParams, Recompute::kNone);
  ASSERT_LT(zero3, zero2);
  IterationModel model(cluster(1, 4, (zero2 + zero3) / 2), w);
  const SearchResult r = search_layouts(model, {4});
  ASSERT_FALSE(r.fitting.empty());
  EXPECT_EQ(r.fitting.front().layout.sharding, ShardingStrategy::kOptimGradsParams);
  for (const Prediction& p : r.fitting)
    EXPECT_EQ(p.layout.sharding, ShardingStrategy::kOptimGradsParams) << p.layout.describe();
  for (const Prediction& p : r.over_memory)
    EXPECT_NE(p.layout.sharding, ShardingStrategy::kOptimGradsParams) << p.layout.describe();
}

// Where only the sequence-parallel form of a layout fits, that is what the search returns.
TEST(PlannerSearch, SequenceParallelFitsWhereTheSameLayoutWithoutDoesNot) {
  Workload w = small_gpt(8);
  w.model.seq_length = 2048;  // activations dominate
  const Layout plain{4, 1, 1, 2, 1, Recompute::kNone};
  Layout split = plain;
  split.sequence_parallel = true;
  IterationModel probe(cluster(1, 4, 80), w);
  const double a = probe.device_memory(plain).total(), b = probe.device_memory(split).total();
  ASSERT_LT(b, a);
  // The parts of [tokens, h] outside attention and the MLP shrink by t; the rest does not.
  EXPECT_GT(a - b, 0.1 * a);
  IterationModel model(cluster(1, 4, (a + b) / 2 / (1L << 30)), w);
  SearchOptions o{4};
  o.tensor = 4, o.pipeline = 1, o.micro_batch = 2, o.recompute = Recompute::kNone;
  SearchResult r = search_layouts(model, o);
  ASSERT_EQ(r.fitting.size(), 1u);
  EXPECT_TRUE(r.fitting[0].layout.sequence_parallel);
  ASSERT_EQ(r.over_memory.size(), 1u);
  EXPECT_FALSE(r.over_memory[0].layout.sequence_parallel);
}

// Issue 16's keys, plus sequence_parallel and pipeline_schedule (issue 19: the planner
// searches sequence parallelism and ZB-H1 too), the sharding strategy and the bytes each rank
// sends for data parallelism (issue 31: ZeRO-2 and 3), and context parallelism's c, path,
// bytes and exposed seconds (issue 37).
TEST(PlannerSearch, JsonHasExactlyTheIssuesKeys) {
  IterationModel model(cluster(1, 4, 80), small_gpt());
  SearchResult r = search_layouts(model, {4});
  nlohmann::json j = nlohmann::json::parse(plans_json(r.fitting, 3));
  ASSERT_EQ(j.size(), 1u);
  ASSERT_EQ(j["plans"].size(), 3u);
  std::set<std::string> keys;
  for (const auto& [key, value] : j["plans"][0].items()) keys.insert(key);
  EXPECT_EQ(keys, (std::set<std::string>{"tensor",
                                         "pipeline",
                                         "data",
                                         "micro_batch",
                                         "virtual",
                                         "recompute",
                                         "distributed_optimizer",
                                         "time_per_iteration_s",
                                         "tflops_per_device",
                                         "memory_per_device_gib",
                                         "bubble",
                                         "sequence_parallel",
                                         "pipeline_schedule",
                                         "data_parallel_sharding_strategy",
                                         "data_parallel_bytes",
                                         "expert_model_parallel_size",
                                         "expert_all_to_all_s",
                                         "context",
                                         "cp_comm_type",
                                         "context_parallel_bytes",
                                         "context_parallel_exposed_s"}));
  EXPECT_DOUBLE_EQ(j["plans"][0]["time_per_iteration_s"], r.fitting[0].time.total());
}

// MoE: EP is searched over the divisors of d that divide the experts (or fixed), and every
// layout of it obeys training's rules; a dense model has EP 1 only.
TEST(PlannerSearch, ExpertParallelSizesDivideTheDataParallelSizeAndTheExperts) {
  Workload w = small_gpt();
  w.precision = kernels::Precision::kFp32;
  w.model.moe.num_experts = 6, w.model.moe.router_topk = 2;
  IterationModel model(cluster(2, 4, 80), w);
  const SearchResult r = search_layouts(model, {8});
  std::set<int> seen;
  for (const Prediction& p : r.fitting) {
    EXPECT_EQ(p.layout.data % p.layout.expert, 0) << p.layout.describe();
    EXPECT_EQ(6 % p.layout.expert, 0) << p.layout.describe();
    EXPECT_TRUE(p.layout.tensor == 1 || p.layout.sequence_parallel) << p.layout.describe();
    if (p.layout.data == 8) seen.insert(p.layout.expert);
    EXPECT_EQ(p.layout.expert > 1, p.time.expert_comm > 0) << p.layout.describe();
  }
  EXPECT_EQ(seen, (std::set<int>{1, 2}));  // d = 8: 4 and 8 do not divide 6 experts
  SearchOptions fixed{8};
  fixed.expert = 2;
  for (const Prediction& p : search_layouts(model, fixed).fitting) EXPECT_EQ(p.layout.expert, 2);
  fixed.expert = 4;
  ASSERT_FALSE(request_violations(model, fixed).empty());
  EXPECT_NE(request_violations(model, fixed)
                .front()
                .find("--num-experts (6) must be divisible by --expert-model-parallel-size (4)"),
            std::string::npos);
  IterationModel dense(cluster(2, 4, 80), small_gpt());
  for (const Prediction& p : search_layouts(dense, {8}).fitting) EXPECT_EQ(p.layout.expert, 1);
}

TEST(PlannerSearch, ImpossibleRequestsSayWhy) {
  Workload w = small_gpt();
  w.model.num_attention_heads = 6;
  w.model.hidden_size = 384;
  IterationModel model(cluster(2, 8, 80), w);
  SearchOptions o{16};
  o.tensor = 4;
  std::vector<std::string> errors = request_violations(model, o);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("--num-attention-heads (6) is not divisible by "
                           "--tensor-model-parallel-size (4); sizes that divide both the heads "
                           "and a node: 1, 2"),
            std::string::npos)
      << errors[0];
  o.tensor = 16;
  EXPECT_NE(request_violations(model, o)[0].find("must fit one node (8 devices)"),
            std::string::npos);
  o.tensor = 0, o.pipeline = -2, o.max_micro_batch = 0;
  errors = request_violations(model, o);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], "--pipeline-model-parallel-size must be >= 1 (got -2)");
  EXPECT_EQ(errors[1], "--max-micro-batch-size must be >= 1 (got 0)");
}

TEST(PlannerSearch, FewerDevicesThanOneReplicaNeedsNamesTheCountThatFits) {
  Workload w = small_gpt();
  IterationModel roomy(cluster(1, 8, 80), w);
  Layout one{1, 1, 1, 1, 1, Recompute::kFull};
  // One device holds a little less than the whole model with its smallest activations.
  const double gib = 1L << 30, need = roomy.device_memory(one).total();
  IterationModel model(cluster(1, 8, 0.9 * need / gib), w);
  SearchOptions o{1};
  SearchResult r = search_layouts(model, o);
  EXPECT_TRUE(r.fitting.empty());
  std::string why = explain_no_fit(model, o, r);
  EXPECT_NE(why.find("nothing fits in"), std::string::npos) << why;
  EXPECT_NE(why.find("it would fit on 2 devices (--num-devices 2)"), std::string::npos) << why;
}

TEST(PlannerSearch, HeadsThatAllowNoTensorSplitAreNamed) {
  Workload w = small_gpt();
  w.model.num_attention_heads = 7, w.model.hidden_size = 448;
  IterationModel roomy(cluster(1, 8, 80), w);
  Layout one{1, 1, 1, 1, 1, Recompute::kFull};
  const double gib = 1L << 30, need = roomy.device_memory(one).total();
  IterationModel model(cluster(1, 8, 0.9 * need / gib), w);
  SearchOptions o{1};
  SearchResult r = search_layouts(model, o);
  EXPECT_TRUE(r.fitting.empty());
  std::string why = explain_no_fit(model, o, r);
  EXPECT_NE(why.find("--num-attention-heads (7) allows only t = 1 of a node's 8 devices"),
            std::string::npos)
      << why;
}

TEST(PlannerSearch, AFixedDimensionThatRulesEverythingOutIsNamed) {
  IterationModel model(cluster(1, 8, 80), small_gpt());
  SearchOptions o{8};
  o.micro_batch = 64;  // b x d must divide the global batch of 32
  SearchResult r = search_layouts(model, o);
  EXPECT_EQ(r.evaluated, 0);
  std::string why = explain_no_fit(model, o, r);
  EXPECT_NE(why.find("no layout of 8 devices satisfies the divisibility rules"), std::string::npos);
  EXPECT_NE(why.find("without the layout flags given, it would fit on 8 devices"),
            std::string::npos)
      << why;
}

// The search's 10 s bound for this model is a benchmark's figure (build/bench/bench_planner),
// not a timed test: here, that every layout is simulated and timed when all of them fit.
TEST(PlannerSearch, TheOneTrillionModelOver3072DevicesTimesEveryLayout) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "thousands of simulated schedules: minutes under the sanitizers";
#endif
  Cluster c = load_cluster(TRIDENT_SOURCE_DIR "/clusters/dgx-a100.toml");
  c.device.memory_gib = 1e9;  // every layout fits, so every one is simulated and timed
  Workload w;
  w.model.num_layers = 128, w.model.hidden_size = 25600, w.model.num_attention_heads = 160;
  w.model.seq_length = 2048, w.model.vocab_size = 51200;
  w.global_batch = 3072;
  IterationModel model(c, w);
  SearchResult r = search_layouts(model, {3072});
  EXPECT_GT(r.timed, 1000);
  EXPECT_EQ(r.timed, r.evaluated);
}

// Llama-3-8B's shape (32 layers, h 4096, 32 heads, 8 key/value groups, SwiGLU 14336,
// vocabulary 128256) at `seq` tokens, global batch 8, bf16.
Workload llama_8b_at(int seq) {
  Workload w;
  ModelConfig& m = w.model;
  m.num_layers = 32, m.hidden_size = 4096, m.num_attention_heads = 32, m.seq_length = seq;
  m.normalization = "RMSNorm", m.position_embedding_type = "rope", m.swiglu = true;
  m.ffn_hidden_size = 14336, m.group_query_attention = true, m.num_query_groups = 8;
  m.disable_bias_linear = true, m.untie_embeddings_and_output_weights = true;
  m.vocab_size = 128256;
  w.global_batch = 8;
  w.precision = kernels::Precision::kBf16;
  return w;
}

// The smallest memory of the layouts a search evaluated, without and with c > 1.
std::pair<double, double> smallest_memory(const SearchResult& r) {
  double without = 1e300, with = 1e300;
  for (const auto* list : {&r.fitting, &r.over_memory})
    for (const Prediction& p : *list) {
      double& smallest = p.layout.context > 1 ? with : without;
      smallest = std::min(smallest, p.memory.total());
    }
  return {without, with};
}

// A long sequence: on 8 A100s (clusters/dgx-a100.toml) Llama-3-8B at seq 32768 trains fastest
// with its sequences split over cp ranks.
TEST(PlannerSearch, RecommendsContextParallelismForALongSequence) {
  IterationModel model(load_cluster(TRIDENT_SOURCE_DIR "/clusters/dgx-a100.toml"),
                       llama_8b_at(32768));
  const SearchResult r = search_layouts(model, {8});
  ASSERT_FALSE(r.fitting.empty());
  const Prediction& best = r.fitting.front();
  EXPECT_GT(best.layout.context, 1) << best.layout.describe();
  EXPECT_GT(best.time.context_comm, 0);
  EXPECT_GT(best.context_bytes, 0);
}

// Where activations fit no layout without context parallelism every fitting plan has c > 1:
// on two nodes of 8 a tensor group stops at 8 ranks, and pipeline and data-parallel ranks
// do not shrink a rank's activations (1F1B's first stage keeps p micro-batches of L / p
// layers), so from 16 devices only c splits them further. Devices get memory between the
// smallest layout with c = 1 and the smallest with c > 1. Below kContextSearchSeq tokens the
// search adds c > 1 only then.
TEST(PlannerSearch, RecommendsContextParallelismWhereNothingElseFits) {
  for (int seq : {32768, 4096}) {
    Workload w = llama_8b_at(seq);
    w.model.num_layers = 8;  // quick: the same per-layer memory
    // At 4096 tokens Llama's layers weigh more than their activations (and c = 1 may halve
    // them with p = 2 where c = 2 fills the 16 devices): a narrow model with a small
    // vocabulary, so that activations decide.
    if (seq < kContextSearchSeq) {
      ModelConfig& m = w.model;
      m.hidden_size = 256, m.num_attention_heads = 8, m.ffn_hidden_size = 896;
      m.vocab_size = 1000;
    }
    w.global_batch = 16;
    IterationModel big(cluster(2, 8, 1e6), w);
    SearchOptions all{16};
    auto [without, with] = smallest_memory(search_layouts(big, all));
    if (seq < kContextSearchSeq) {  // everything fits: c > 1 not searched
      EXPECT_EQ(with, 1e300);
      SearchOptions fixed{16};
      fixed.context = 2;
      with = smallest_memory(search_layouts(big, fixed)).second;
    }
    ASSERT_LT(with, without) << seq;
    const double gib = (with + without) / 2 / (1L << 30);
    IterationModel tight(cluster(2, 8, gib), w);
    const SearchResult r = search_layouts(tight, all);
    ASSERT_FALSE(r.fitting.empty()) << seq;
    for (const Prediction& p : r.fitting) {
      EXPECT_GT(p.layout.context, 1) << p.layout.describe();
      EXPECT_EQ(p.layout.devices(), 16);
      EXPECT_EQ(seq % (2 * p.layout.context), 0);
      EXPECT_GT(p.time.context_comm, 0) << p.layout.describe();
    }
    SearchOptions no_cp{16};
    no_cp.context = 1;
    EXPECT_TRUE(search_layouts(tight, no_cp).fitting.empty());
  }
}

struct CommandResult {
  int exit_code;
  std::string output;
};

CommandResult run(const std::string& args) {
  const trident::testing::ShellResult r =
      trident::testing::run_shell(std::string(TRIDENT_BINARY) + " plan " + args + " 2>&1");
  return {r.exit_code, r.output};
}

// Small enough that the tests stay quick under the sanitizers: 8 layers, h = 2048, on 16 A100s.
const std::string kGpt =
    "--cluster " TRIDENT_SOURCE_DIR
    "/clusters/dgx-a100.toml --num-layers 8 --hidden-size 2048 --num-attention-heads 16 "
    "--seq-length 1024 --vocab-size 51200 --global-batch-size 64 --bf16";

TEST(PlanCommand, RanksExplainsAndEstimates) {
  CommandResult r = run(kGpt + " --num-devices 16 --train-tokens 300e9 --top 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* part : {"time/iter", "where the time goes",
                           "best plan, t=", "rank-to-node mapping", "days by the paper's 8TP/(nX)"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  CommandResult j = run(kGpt + " --num-devices 16 --json --top 2");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  nlohmann::json plans = nlohmann::json::parse(j.output)["plans"];
  ASSERT_EQ(plans.size(), 2u);
  EXPECT_EQ(
      plans[0]["tensor"].get<int>() * plans[0]["pipeline"].get<int>() * plans[0]["data"].get<int>(),
      16);
}

// `trident plan` takes Megatron's MoE flags: the best plan names its EP and the all-to-alls,
// in fp32, bf16 (kGpt's) and fp16.
TEST(PlanCommand, PlansAnMoeModelWithItsExpertParallelSize) {
  const std::string fp32 = kGpt.substr(0, kGpt.rfind(" --bf16"));
  const std::string flags =
      " --num-devices 16 --num-experts 8 --moe-router-topk 2 --moe-layer-freq 2 "
      "--expert-model-parallel-size 4";
  for (const std::string& base : {fp32, kGpt, fp32 + " --fp16"}) {
    CommandResult r = run(base + flags);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("ep=4"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("expert all-to-alls"), std::string::npos) << r.output;
  }
  CommandResult bad =
      run(fp32 + " --num-devices 16 --num-experts 6 --expert-model-parallel-size 4");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("must be divisible by --expert-model-parallel-size (4)"),
            std::string::npos)
      << bad.output;
  CommandResult stray = run(kGpt + " --num-devices 16 --moe-router-topk 2");
  EXPECT_EQ(stray.exit_code, 2) << stray.output;
  EXPECT_NE(stray.output.find("--moe-router-topk needs --num-experts"), std::string::npos)
      << stray.output;
}

TEST(PlanCommand, ShardingIsSearchedUnlessFixed) {
  const std::string gpt = kGpt + " --num-devices 16 --json --top 1000";
  auto count = [](const std::string& out, const std::string& text) {
    size_t n = 0;
    for (size_t at = out.find(text); at != std::string::npos; at = out.find(text, at + 1)) ++n;
    return n;
  };
  auto strategy = [](const char* name) {
    return "\"data_parallel_sharding_strategy\": \"" + std::string(name) + "\"";
  };
  CommandResult searched = run(gpt);
  for (const char* name : {"no_shard", "optim", "optim_grads", "optim_grads_params"})
    EXPECT_GT(count(searched.output, strategy(name)), 0u) << name;
  EXPECT_GT(count(searched.output, "\"distributed_optimizer\": true"), 0u);
  EXPECT_GT(count(searched.output, "\"distributed_optimizer\": false"), 0u);
  // The old switches keep their meaning: off is no_shard, on is optim (ZeRO-1).
  CommandResult off = run(gpt + " --no-distributed-optimizer --recompute-granularity none");
  EXPECT_EQ(count(off.output, "\"distributed_optimizer\": true"), 0u) << off.output;
  EXPECT_EQ(count(off.output, "\"recompute\": \"full\""), 0u);
  CommandResult on = run(gpt + " --use-distributed-optimizer");
  EXPECT_EQ(count(on.output, "\"distributed_optimizer\": false"), 0u);
  EXPECT_EQ(count(on.output, strategy("optim")), count(on.output, "\"tensor\""));
  for (const char* name : {"optim_grads", "optim_grads_params"}) {
    CommandResult fixed = run(gpt + " --data-parallel-sharding-strategy " + name);
    ASSERT_EQ(fixed.exit_code, 0) << fixed.output;
    EXPECT_GT(count(fixed.output, strategy(name)), 0u) << name;
    EXPECT_EQ(count(fixed.output, strategy(name)), count(fixed.output, "\"tensor\"")) << name;
  }
}

// A strategy that cannot combine with the other flags says which and why.
TEST(PlanCommand, ShardingFlagsThatDisagreeExitTwo) {
  auto expect_refused = [](const std::string& flags, const std::string& why) {
    CommandResult r = run(kGpt + " --num-devices 16 " + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(why), std::string::npos) << flags << "\n" << r.output;
  };
  expect_refused("--data-parallel-sharding-strategy zero2",
                 "--data-parallel-sharding-strategy: zero2 not in");
  expect_refused("--data-parallel-sharding-strategy no_shard --use-distributed-optimizer",
                 "cannot be combined with --data-parallel-sharding-strategy no_shard");
  expect_refused("--data-parallel-sharding-strategy optim_grads --no-distributed-optimizer",
                 "--no-distributed-optimizer leaves the optimizer whole");
}

TEST(PlanCommand, BadInputExitsNonZeroWithTheReason) {
  CommandResult missing = run("--cluster /nonexistent.toml --global-batch-size 8");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("/nonexistent.toml: cannot be read (--cluster)"),
            std::string::npos);
  CommandResult heads = run(kGpt + " --tensor-model-parallel-size 16");
  EXPECT_EQ(heads.exit_code, 2);
  EXPECT_NE(heads.output.find("must fit one node (8 devices)"), std::string::npos) << heads.output;
  // 4.8B parameters (24 layers, h = 4096) at 18 bytes each do not fit one 80 GiB device.
  CommandResult one =
      run("--cluster " TRIDENT_SOURCE_DIR
          "/clusters/dgx-a100.toml --num-layers 24 --hidden-size 4096 --num-attention-heads 32 "
          "--seq-length 512 --vocab-size 51200 --global-batch-size 8 --bf16 --num-devices 1");
  EXPECT_EQ(one.exit_code, 1);
  EXPECT_NE(one.output.find("nothing fits in 80.0 GiB per device"), std::string::npos)
      << one.output;
  EXPECT_NE(one.output.find("fewer devices than it needs: it would fit on 2 devices"),
            std::string::npos)
      << one.output;
}

// `trident plan --context-parallel-size` fixes c: the best plan and the launch line name it;
// a c the sequence or the heads do not allow is refused by the rule's words (exit 2).
TEST(PlanCommand, FixesTheContextParallelSize) {
  CommandResult r = run(kGpt + " --num-devices 16 --context-parallel-size 2 --top 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("best plan, t="), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" c=2 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("context-parallel attention traffic"), std::string::npos) << r.output;
  CommandResult j = run(kGpt + " --num-devices 16 --context-parallel-size 4 --json --top 1");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  const nlohmann::json best = nlohmann::json::parse(j.output)["plans"][0];
  EXPECT_EQ(best["context"].get<int>(), 4);
  EXPECT_EQ(best["cp_comm_type"].get<std::string>(), "p2p");
  EXPECT_EQ(best["tensor"].get<int>() * best["context"].get<int>() * best["pipeline"].get<int>() *
                best["data"].get<int>(),
            16);
  CommandResult bad = run(kGpt + " --num-devices 16 --context-parallel-size 3");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--seq-length (1024) must be divisible by 2 x --context-parallel-size"),
            std::string::npos)
      << bad.output;
  CommandResult heads = run(kGpt +
                            " --num-devices 16 --context-parallel-size 4 --cp-comm-type a2a "
                            "--tensor-model-parallel-size 8");
  EXPECT_EQ(heads.exit_code, 2) << heads.output;
  EXPECT_NE(heads.output.find("--cp-comm-type a2a needs the attention heads (2)"),
            std::string::npos)
      << heads.output;
}

}  // namespace
}  // namespace trident::planner
