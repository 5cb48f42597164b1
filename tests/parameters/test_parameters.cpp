// The parameter layout: shard maps cover each global element exactly once, and the
// initialisation does not depend on the tensor-parallel size.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <set>

#include "core/normal_fill.h"
#include "core/random.h"
#include "parameters/parameters.h"

namespace trident {
namespace {

ModelConfig tiny() {
  ModelConfig c;
  c.num_layers = 2, c.hidden_size = 16, c.num_attention_heads = 4, c.seq_length = 8;
  c.vocab_size = 300;
  return c;
}

TEST(ParameterLayout, VocabularyPaddedAsMegatron) {
  ModelConfig c = tiny();
  EXPECT_EQ(c.padded_vocab_size(1), 384);
  EXPECT_EQ(c.padded_vocab_size(4), 512);
  c.vocab_size = 50257;
  EXPECT_EQ(c.padded_vocab_size(1), 50304);
  EXPECT_EQ(c.padded_vocab_size(8), 51200);
}

TEST(ParameterLayout, ShardsPartitionEveryTensor) {
  ModelConfig c = tiny();
  for (int t : {2, 4}) {
    std::vector<ParameterLayout> ranks;
    for (int r = 0; r < t; ++r) ranks.emplace_back(c, TensorParallelRank{r, t});
    for (size_t k = 0; k < ranks[0].specs().size(); ++k) {
      const ParamSpec& first = ranks[0].specs()[k];
      long global = 1;
      for (long d : first.global_shape) global *= d;
      std::multiset<long> seen;
      for (const ParameterLayout& l : ranks) {
        const ParamSpec& s = l.specs()[k];
        for (long i = 0; i < s.numel(); ++i) seen.insert(s.global_index(i));
      }
      long copies = first.shard.dim < 0 ? t : 1;
      ASSERT_EQ((long)seen.size(), global * copies) << first.name;
      for (long g = 0; g < global; ++g) ASSERT_EQ((long)seen.count(g), copies) << first.name;
    }
  }
}

TEST(ParameterLayout, QkvShardTakesItsHeadsOfQKAndV) {
  ModelConfig c = tiny();  // h = 16, 3h = 48 rows, t = 2: rank 1 holds rows 8..15, 24..31, 40..47
  ParameterLayout l(c, {1, 2});
  const ParamSpec& s = l.find("layers.0.self_attention.linear_qkv.bias");
  EXPECT_EQ(s.global_index(0), 8);
  EXPECT_EQ(s.global_index(8), 24);
  EXPECT_EQ(s.global_index(23), 47);
}

TEST(Parameters, InitialisationIndependentOfTensorParallelSize) {
  ModelConfig c = tiny();
  Parameters whole(ParameterLayout(c, {0, 1}));
  whole.initialize(42, 0.02f, c.num_layers);
  for (int r = 0; r < 2; ++r) {
    Parameters shard(ParameterLayout(c, {r, 2}));
    shard.initialize(42, 0.02f, c.num_layers);
    for (const ParamSpec& s : shard.layout().specs()) {
      if (s.name == "embedding.word_embeddings.weight") continue;  // padding differs with t
      const ParamSpec& w = whole.layout().find(s.name);
      for (long i = 0; i < s.numel(); ++i)
        ASSERT_EQ(shard.values()[s.offset + i], whole.values()[w.offset + s.global_index(i)])
            << s.name;
    }
  }
}

// Sharded weights (ZeRO-3) draw only their shard: any range, even one cutting tensors, holds
// the whole buffer's values there and nothing else.
TEST(Parameters, InitialisingARangeDrawsTheWholeBuffersValuesThere) {
  ModelConfig c = tiny();
  Parameters whole(ParameterLayout(c, {0, 1}));
  whole.initialize(42, 0.02f, c.num_layers);
  const long n = whole.size();
  for (auto [begin, end] : std::vector<std::pair<long, long>>{{0, n / 3}, {n / 3 + 5, n - 7}}) {
    Parameters part(ParameterLayout(c, {0, 1}), 16, GradientMemory::kNone, ValueMemory::kSharded);
    part.initialize(42, 0.02f, c.num_layers, {}, begin, end);
    for (long i = 0; i < n; ++i)
      ASSERT_EQ(part.values()[i], i >= begin && i < end ? whole.values()[i] : 0.f) << i;
  }
}

// The units ZeRO-3 gathers: the embedding, each layer, the final norm; on a later stage of a
// tied model the copy of the word embedding comes first, on its own.
TEST(ParameterLayout, WeightUnitsAreTheEmbeddingEachLayerAndTheRest) {
  ModelConfig c = tiny();
  const ParameterLayout layout(c, {0, 1});
  const auto units = weight_units(layout);
  ASSERT_EQ(units.size(), 4u);
  const auto& specs = layout.specs();
  auto names = [&](std::pair<int, int> u) {
    std::string all;
    for (int k = u.first; k < u.second; ++k) all += specs[k].name + " ";
    return all;
  };
  EXPECT_EQ(names(units[0]),
            "embedding.word_embeddings.weight embedding.position_embeddings.weight ");
  EXPECT_EQ(units[1].second - units[1].first, kParamsPerLayer);
  EXPECT_EQ(specs[units[1].first].name, "layers.0.input_layernorm.weight");
  EXPECT_EQ(specs[units[2].first].name, "layers.1.input_layernorm.weight");
  EXPECT_EQ(names(units[3]), "final_layernorm.weight final_layernorm.bias ");
  EXPECT_EQ(units.back().second, (int)specs.size());
  // The last of two stages: the tied copy, layer 1, the final norm.
  ChunkPlacement last;
  last.first_layer = 1, last.num_layers = 1, last.pre_process = false, last.post_process = true;
  const ParameterLayout tail(c, {0, 1}, last);
  const auto tail_units = weight_units(tail);
  ASSERT_EQ(tail_units.size(), 3u);
  EXPECT_EQ(tail_units[0], std::make_pair(0, 1));
  EXPECT_EQ(tail.specs()[0].name, "embedding.word_embeddings.weight");
  EXPECT_EQ(tail.specs()[tail_units[1].first].name, "layers.1.input_layernorm.weight");
}

TEST(Parameters, InitScalesOutputProjections) {
  ModelConfig c = tiny();
  c.hidden_size = 64, c.num_layers = 8;
  Parameters p(ParameterLayout(c, {0, 1}));
  p.initialize(1, 0.02f, c.num_layers);
  auto stddev = [&](const std::string& name) {
    ParamRef r = p.get(name);
    double s = 0;
    for (long i = 0; i < r.numel; ++i) s += (double)r.value[i] * r.value[i];
    return std::sqrt(s / r.numel);
  };
  EXPECT_NEAR(stddev("layers.0.mlp.linear_fc1.weight"), 0.02, 0.001);
  EXPECT_NEAR(stddev("layers.0.mlp.linear_fc2.weight"), 0.02 / 4.0, 0.0003);
  EXPECT_NEAR(stddev("layers.3.self_attention.linear_proj.weight"), 0.02 / 4.0, 0.0005);
  EXPECT_EQ(p.get("layers.0.input_layernorm.weight").value[5], 1.f);
  EXPECT_EQ(p.get("layers.0.mlp.linear_fc1.bias").value[5], 0.f);
}

}  // namespace
}  // namespace trident

namespace trident {
namespace {

// Every run that contiguous_run promises has consecutive global indices, under column
// shards with strides (q|k|v), row shards (the vocabulary) and whole tensors.
TEST(ParameterLayout, ContiguousRunsHaveConsecutiveGlobalIndices) {
  ModelConfig c = tiny();
  for (int t : {1, 2, 4})
    for (int r = 0; r < t; ++r) {
      const ParameterLayout layout(c, TensorParallelRank{r, t});
      for (const ParamSpec& s : layout.specs())
        for (long i = 0, run = 0; i < s.numel(); i += run) {
          run = s.contiguous_run(i);
          ASSERT_GT(run, 0);
          ASSERT_LE(i + run, s.numel());
          for (long k = 1; k < run; ++k)
            ASSERT_EQ(s.global_index(i + k), s.global_index(i) + k) << s.name << " t=" << t;
        }
    }
}

// Parameters::initialize against the element-by-element definition (the implementation it
// replaced): every value, every tensor, under t = 1, 2 and 4.
TEST(Parameters, InitialisationEqualsTheScalarDefinition) {
  ModelConfig c = tiny();
  c.hidden_size = 64, c.vocab_size = 1000;  // long enough rows for the vector path
  for (int t : {1, 2, 4})
    for (int r = 0; r < t; ++r) {
      Parameters p(ParameterLayout(c, TensorParallelRank{r, t}));
      p.initialize(99, 0.02f, c.num_layers);
      const float scaled = 0.02f / std::sqrt(2.f * c.num_layers);
      for (const ParamSpec& s : p.layout().specs()) {
        if (s.init != InitKind::kNormal && s.init != InitKind::kScaledNormal) continue;
        const float sigma = s.init == InitKind::kNormal ? 0.02f : scaled;
        for (long i = 0; i < s.numel(); ++i) {
          const float want =
              (float)(sigma * normal_at(99, hash_string(s.name), (std::uint64_t)s.global_index(i)));
          ASSERT_EQ(std::bit_cast<std::uint32_t>(p.values()[s.offset + i]),
                    std::bit_cast<std::uint32_t>(want))
              << s.name << " t=" << t << " rank " << r << " element " << i;
        }
      }
    }
}

// MoE layers (issue 32): Megatron's names per global expert, the router replicated, no dense
// fc1 / fc2; dense layers of a mixed --moe-layer-freq pattern keep theirs. The experts'
// values under t = 2 are slices of the one-process ones and equal the scalar definition
// (the dense fc1's sigma for fc1 and the router, the scaled one for fc2), so every layout
// draws the same model.
ModelConfig tiny_moe() {
  ModelConfig c = tiny();
  c.num_layers = 3, c.swiglu = true;
  c.moe.num_experts = 4, c.moe.ffn_hidden_size = 24;
  c.moe.layer_pattern = {true, false, true};
  return c;
}

TEST(ParameterLayout, MoeLayersHoldTheRouterAndOneFc1AndFc2PerExpert) {
  const ModelConfig c = tiny_moe();
  const ParameterLayout layout(c, {0, 1});
  for (int l : {0, 2}) {
    EXPECT_FALSE(layout.contains(layer_param(l, "mlp.linear_fc1.weight")));
    EXPECT_FALSE(layout.contains(layer_param(l, "mlp.linear_fc2.weight")));
    EXPECT_EQ(layout.find(layer_param(l, "mlp.router.weight")).global_shape,
              (std::vector<long>{4, 16}));
    for (int e = 0; e < 4; ++e) {
      EXPECT_EQ(layout.find(moe_expert_param(l, e, "linear_fc1.weight")).global_shape,
                (std::vector<long>{48, 16}));
      EXPECT_EQ(layout.find(moe_expert_param(l, e, "linear_fc2.weight")).global_shape,
                (std::vector<long>{16, 24}));
    }
    EXPECT_EQ(moe_expert_param(l, 3, "linear_fc2.weight"),
              "layers." + std::to_string(l) + ".mlp.experts.3.linear_fc2.weight");
  }
  EXPECT_TRUE(layout.contains("layers.1.mlp.linear_fc1.weight"));
  EXPECT_FALSE(layout.contains("layers.1.mlp.router.weight"));
  const ParameterLayout half(c, {1, 2});
  EXPECT_EQ(half.find("layers.0.mlp.router.weight").local_shape, (std::vector<long>{4, 16}));
  EXPECT_EQ(half.find(moe_expert_param(0, 1, "linear_fc1.weight")).local_shape,
            (std::vector<long>{24, 16}));
  EXPECT_EQ(half.find(moe_expert_param(0, 1, "linear_fc2.weight")).local_shape,
            (std::vector<long>{16, 12}));
}

// Expert parallelism (ExpertSlice): the dense buffer keeps the router and no expert; rank r's
// expert buffer holds exactly experts [r E/EP, (r+1) E/EP) of every MoE layer, by global
// name, and nothing else, with the values one process draws for them.
TEST(ParameterLayout, ExpertSlicesSplitTheExpertsOverExpertParallelRanks) {
  const ModelConfig c = tiny_moe();
  EXPECT_FALSE(splits_experts(c, 1));
  EXPECT_TRUE(splits_experts(c, 2));
  const ParameterLayout inline_layout(c, {0, 1});
  const ParameterLayout dense(c, {0, 1}, {}, dense_expert_slice(c, 2));
  for (const ParamSpec& s : inline_layout.specs())
    EXPECT_EQ(dense.contains(s.name), s.name.find(".mlp.experts.") == std::string::npos) << s.name;
  Parameters whole(inline_layout);
  whole.initialize(7, 0.02f, c.num_layers);
  long expert_floats = 0;
  for (int r = 0; r < 2; ++r) {
    Parameters mine(ParameterLayout(c, {0, 1}, {}, expert_buffer_slice(c, 2, r)));
    mine.initialize(7, 0.02f, c.num_layers);
    EXPECT_EQ(mine.layout().specs().size(), 2u * 2 * 2);  // 2 MoE layers x 2 experts x 2
    for (int l : {0, 2})
      for (int e = 0; e < 4; ++e) {
        const std::string name = moe_expert_param(l, e, "linear_fc1.weight");
        ASSERT_EQ(mine.layout().contains(name), e / 2 == r) << name;
        if (e / 2 != r) continue;
        const ParamSpec& s = mine.layout().find(name);
        const ParamSpec& w = whole.layout().find(name);
        for (long i = 0; i < s.numel(); ++i)
          ASSERT_EQ(mine.values()[s.offset + i], whole.values()[w.offset + i]) << name;
      }
    expert_floats += mine.layout().total();
  }
  EXPECT_EQ(dense.total() + expert_floats, inline_layout.total());
}

TEST(Parameters, MoeExpertsDrawTheSameValuesUnderAnyTensorParallelSize) {
  const ModelConfig c = tiny_moe();
  Parameters whole(ParameterLayout(c, {0, 1}));
  whole.initialize(7, 0.02f, c.num_layers);
  const float scaled = 0.02f / std::sqrt(2.f * c.num_layers);
  for (const ParamSpec& s : whole.layout().specs()) {
    if (s.name.find(".mlp.") == std::string::npos ||
        s.name.find(".mlp.linear") != std::string::npos)
      continue;
    const bool fc2 = s.name.find("linear_fc2") != std::string::npos;
    EXPECT_EQ(s.init, fc2 ? InitKind::kScaledNormal : InitKind::kNormal) << s.name;
    EXPECT_TRUE(s.weight_decay) << s.name;
    for (long i = 0; i < s.numel(); ++i)
      ASSERT_EQ(
          whole.values()[s.offset + i],
          (float)((fc2 ? scaled : 0.02f) * normal_at(7, hash_string(s.name), (std::uint64_t)i)))
          << s.name;
  }
  for (int r = 0; r < 2; ++r) {
    Parameters shard(ParameterLayout(c, {r, 2}));
    shard.initialize(7, 0.02f, c.num_layers);
    for (const ParamSpec& s : shard.layout().specs()) {
      if (s.name.find(".mlp.") == std::string::npos) continue;
      const ParamSpec& w = whole.layout().find(s.name);
      for (long i = 0; i < s.numel(); ++i)
        ASSERT_EQ(shard.values()[s.offset + i], whole.values()[w.offset + s.global_index(i)])
            << s.name;
    }
  }
}

}  // namespace
}  // namespace trident
