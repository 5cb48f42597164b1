// The pipeline splits against rules worked by hand: Megatron's --account-for-embedding/loss-
// in-pipeline-split counts (transformer_block.py's get_num_layers_to_build: L + e + l over p x
// v, one fewer on the first / last virtual stage), and the balanced split against GPT-2's FLOPs
// written out here and against every contiguous split tried by brute force.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "engine/pipeline_split.h"
#include "engine/rank_layout.h"

namespace trident::engine {
namespace {

TEST(PipelineSplit, AccountForFlagsGiveMegatronsLayerCounts) {
  // 14 layers + embedding + loss = 16 over p = 4: 4 each, the ends build 3.
  EXPECT_EQ(account_for_split(14, 4, 1, true, true), (std::vector<int>{3, 4, 4, 3}));
  // 7 + loss = 8 over 4: 2 each, the last builds 1; 7 + embedding: the first builds 1.
  EXPECT_EQ(account_for_split(7, 4, 1, false, true), (std::vector<int>{2, 2, 2, 1}));
  EXPECT_EQ(account_for_split(7, 4, 1, true, false), (std::vector<int>{1, 2, 2, 2}));
  // Interleaved, p = 2, v = 2: 16 counted layers, 4 per virtual stage; the first virtual
  // stage of pipeline rank 0 (index 0) and the last of rank 1 (index 1 x 2 + 1) build 3.
  EXPECT_EQ(account_for_split(14, 2, 2, true, true), (std::vector<int>{3, 4, 4, 3}));
  // p = 1: both ends are the one stage, which builds every layer.
  EXPECT_EQ(account_for_split(12, 1, 1, true, true), (std::vector<int>{12}));
}

TEST(PipelineSplit, AccountForFlagsThatCannotDivideAreRefused) {
  EXPECT_TRUE(account_for_split(12, 2, 1, false, true).empty());  // 13 over 2
  EXPECT_TRUE(account_for_split(12, 4, 1, true, true).empty());   // 14 over 4
  // 2 + 2 over 4: Megatron would build 0 layers on the ends; trident needs one.
  EXPECT_TRUE(account_for_split(2, 4, 1, true, true).empty());
}

ModelConfig gpt2_small() {
  ModelConfig m;
  m.num_layers = 12, m.hidden_size = 768, m.num_attention_heads = 12, m.seq_length = 1024;
  m.vocab_size = 50257;
  return m;
}

TEST(PipelineSplit, BalancedGpt2SmallPutsFewerLayersOnTheLastStage) {
  for (int seq : {256, 1024}) {
    ModelConfig m = gpt2_small();
    m.seq_length = seq;
    // GPT-2's forward FLOPs per token (Narayanan et al. 2021): a layer 24 h^2 + 4 s h (QKV
    // 6h^2, projection 2h^2, MLP 16h^2, attention 4sh); the output layer 2 h V over the padded
    // vocabulary (50304). Forward and backward: three times each.
    const double h = 768, layer = 3 * (24 * h * h + 4 * seq * h), head = 3 * 2 * h * 50304;
    int best = 0;
    double best_max = 1e300;
    for (int k = 1; k < 12; ++k) {
      const double most = std::max(k * layer, (12 - k) * layer + head);
      if (most < best_max) best_max = most, best = k;
    }
    const std::vector<int> split = balanced_model_split(m, 1, 2, false);
    EXPECT_EQ(split, (std::vector<int>{best, 12 - best})) << "seq " << seq;
    EXPECT_LT(split[1], split[0]);
    // Without a split flag p = 2 gets it; interleaved stages and p = 1 keep the even split.
    EXPECT_EQ(default_split(m, 1, 2, 1, false), split);
    EXPECT_EQ(default_split(m, 1, 2, 2, false), (std::vector<int>{3, 3, 3, 3}));
    EXPECT_EQ(default_split(m, 1, 1, 1, false), (std::vector<int>{12}));
  }
  // By hand: at s = 256 a layer is 14.94 MFLOP, the output layer 77.27 (5.17 layers): 9 | 3
  // + 5.17; at s = 1024 17.30 and 77.27 (4.47 layers): 8 | 4 + 4.47.
  ModelConfig m = gpt2_small();
  EXPECT_EQ(balanced_model_split(m, 1, 2, false), (std::vector<int>{8, 4}));
  m.seq_length = 256;
  EXPECT_EQ(balanced_model_split(m, 1, 2, false), (std::vector<int>{9, 3}));
}

// The least largest stage cost over every contiguous split with a layer in each stage.
double brute_force_least_max(const StageCosts& c, int stages) {
  const int L = (int)c.layers.size();
  double best = 1e300;
  std::vector<int> split;
  std::function<void(int, int)> place = [&](int from, int s) {
    if (s == stages - 1) {
      split.push_back(L - from);
      double most = 0;
      for (double v : stage_costs(c, split)) most = std::max(most, v);
      best = std::min(best, most);
      split.pop_back();
      return;
    }
    for (int k = 1; from + k <= L - (stages - 1 - s); ++k) {
      split.push_back(k);
      place(from + k, s + 1);
      split.pop_back();
    }
  };
  place(0, 0);
  return best;
}

TEST(PipelineSplit, BalancedSplitReachesTheLeastLargestStage) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.5, 3.0);
  for (int trial = 0; trial < 60; ++trial) {
    const int L = 4 + trial % 9, stages = 2 + trial % 3;
    StageCosts c;
    for (int i = 0; i < L; ++i) c.layers.push_back(cost(rng));
    c.first_extra = trial % 2 ? cost(rng) : 0;
    c.last_extra = 3 * cost(rng);
    const std::vector<int> split = balanced_split(c, stages);
    ASSERT_EQ((int)split.size(), stages);
    int total = 0;
    for (int n : split) {
      EXPECT_GE(n, 1);
      total += n;
    }
    EXPECT_EQ(total, L);
    double most = 0;
    for (double v : stage_costs(c, split)) most = std::max(most, v);
    EXPECT_NEAR(most, brute_force_least_max(c, stages), 1e-9) << "trial " << trial;
  }
  EXPECT_TRUE(balanced_split(StageCosts{{1, 1}, 0, 1}, 3).empty());  // fewer layers than stages
}

TEST(PipelineSplit, BalancedSlackSpreadsOverTheFirstStages) {
  // 12 layers of cost 1, the output layer 5: the last stage takes one layer (6 is the least
  // largest stage); the other 11 spread 4 4 3, not 6 4 1.
  StageCosts c{std::vector<double>(12, 1.0), 0, 5};
  EXPECT_EQ(balanced_split(c, 4), (std::vector<int>{4, 4, 3, 1}));
}

TEST(PipelineSplit, DecoderFirstLastGiveTheRestEvenly) {
  EXPECT_EQ(decoder_split(8, 4, 3, 1), (std::vector<int>{3, 2, 2, 1}));
  EXPECT_EQ(decoder_split(12, 2, 0, 3), (std::vector<int>{9, 3}));
  EXPECT_TRUE(decoder_split(9, 4, 3, 1).empty());  // 5 over 2
}

}  // namespace
}  // namespace trident::engine
