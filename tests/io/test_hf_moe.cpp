// HF Mixtral and Qwen3-MoE config.json and tensor names against HF's definitions
// (configuration_mixtral.py / configuration_qwen3_moe.py, Qwen3MoeDecoderLayer's layer rule,
// transformers v5's checkpoint conversion mapping), not against trident's own output.
#include <gtest/gtest.h>

#include "io/hf_moe.h"

namespace trident::io {
namespace {

using json = nlohmann::json;

json mixtral() {
  return {{"architectures", {"MixtralForCausalLM"}},
          {"model_type", "mixtral"},
          {"num_hidden_layers", 3},
          {"hidden_size", 32},
          {"intermediate_size", 40},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"vocab_size", 101},
          {"max_position_embeddings", 24},
          {"sliding_window", nullptr},
          {"num_local_experts", 8},
          {"num_experts_per_tok", 2}};
}

json qwen3_moe() {
  return {{"architectures", {"Qwen3MoeForCausalLM"}},
          {"model_type", "qwen3_moe"},
          {"num_hidden_layers", 6},
          {"hidden_size", 32},
          {"intermediate_size", 48},
          {"moe_intermediate_size", 24},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"head_dim", 16},
          {"vocab_size", 101},
          {"max_position_embeddings", 24},
          {"num_experts", 6},
          {"num_experts_per_tok", 2}};
}

ModelConfig parse(const json& j, std::vector<std::string>* problems = nullptr) {
  std::vector<std::string> mine;
  ModelConfig c = parse_moe_config(j, problems ? *problems : mine);
  if (!problems) EXPECT_TRUE(mine.empty()) << mine.front();
  return c;
}

// Found by fuzz_hf_config: a Qwen3 config without head_dim whose head count is not a number
// was divided by before its problem was reported.
TEST(HfMoe, ABadHeadCountWithoutHeadDimIsAProblemNotADivision) {
  json j = qwen3_moe();
  j.erase("head_dim");
  j["num_attention_heads"] = "qwen3_moe";
  std::vector<std::string> problems;
  parse(j, &problems);
  ASSERT_FALSE(problems.empty());
  bool named = false;
  for (const std::string& p : problems) named |= p.find("num_attention_heads") != std::string::npos;
  EXPECT_TRUE(named) << problems.front();
}

std::vector<bool> moe_layers(const ModelConfig& c) {
  std::vector<bool> out;
  for (int l = 0; l < c.num_layers; ++l) out.push_back(c.is_moe_layer(l));
  return out;
}

TEST(HfMoe, MixtralIsEveryLayerMoeWithRenormalisedTopKExpertsOfIntermediateSize) {
  ASSERT_TRUE(is_moe_config(mixtral()));
  const ModelConfig c = parse(mixtral());
  EXPECT_EQ(c.moe.num_experts, 8);
  EXPECT_EQ(c.moe.router_topk, 2);
  EXPECT_EQ(c.moe_ffn(), 40);
  EXPECT_FALSE(c.moe.router_pre_softmax);
  EXPECT_EQ(moe_layers(c), std::vector<bool>(3, true));
  EXPECT_FALSE(c.qk_layernorm);
  EXPECT_FALSE(is_qwen3_moe_model(c));
  json windowed = mixtral();
  windowed["sliding_window"] = 8;  // Mistral's attention
  EXPECT_EQ(parse(windowed).window_size, 8);
}

// Qwen3MoeDecoderLayer: MoE iff not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0.
TEST(HfMoe, Qwen3MoeLayersFollowHfsRuleNotMegatronsModulo) {
  json j = qwen3_moe();
  j["decoder_sparse_step"] = 2, j["mlp_only_layers"] = {3};
  ModelConfig c = parse(j);
  EXPECT_EQ(moe_layers(c), (std::vector<bool>{false, true, false, false, false, true}));
  EXPECT_EQ(c.ffn(), 48);
  EXPECT_EQ(c.moe_ffn(), 24);
  EXPECT_TRUE(c.qk_layernorm);
  EXPECT_EQ(c.head_dim(), 16);
  EXPECT_TRUE(is_qwen3_moe_model(c));
  // norm_topk_prob: HF's default false keeps the top-k softmax weights (pre-softmax).
  EXPECT_TRUE(c.moe.router_pre_softmax);
  j["norm_topk_prob"] = true;
  EXPECT_FALSE(parse(j).moe.router_pre_softmax);
}

TEST(HfMoe, BadMoeKeysAreProblemsNamingThem) {
  auto problems_of = [](const json& j) {
    std::vector<std::string> p;
    parse_moe_config(j, p);
    std::string all;
    for (const std::string& s : p) all += s + "\n";
    return all;
  };
  json j = qwen3_moe();
  j["num_experts_per_tok"] = 7;
  j["mlp_only_layers"] = {6};
  j["norm_topk_prob"] = "yes";
  j.erase("moe_intermediate_size");
  const std::string p = problems_of(j);
  for (const char* key :
       {"num_experts_per_tok", "mlp_only_layers", "norm_topk_prob", "moe_intermediate_size"})
    EXPECT_NE(p.find(key), std::string::npos) << key << "\n" << p;
  j = qwen3_moe();
  j["decoder_sparse_step"] = 7;  // no layer i with (i + 1) % 7 == 0 among 6
  EXPECT_NE(problems_of(j).find("leave no MoE layer"), std::string::npos);
  j = mixtral();
  j["num_local_experts"] = 0;
  EXPECT_NE(problems_of(j).find("num_local_experts"), std::string::npos);
}

TEST(HfMoe, TensorNamesOfBothArchitectures) {
  EXPECT_EQ(moe_hf_modules("mlp.router", false), std::vector<std::string>{"block_sparse_moe.gate"});
  EXPECT_EQ(moe_hf_modules("mlp.router", true), std::vector<std::string>{"mlp.gate"});
  EXPECT_EQ(
      moe_hf_modules("mlp.experts.5.linear_fc1", false),
      (std::vector<std::string>{"block_sparse_moe.experts.5.w1", "block_sparse_moe.experts.5.w3"}));
  EXPECT_EQ(moe_hf_modules("mlp.experts.12.linear_fc1", true),
            (std::vector<std::string>{"mlp.experts.12.gate_proj", "mlp.experts.12.up_proj"}));
  EXPECT_EQ(moe_hf_modules("mlp.experts.0.linear_fc2", false),
            std::vector<std::string>{"block_sparse_moe.experts.0.w2"});
  EXPECT_EQ(moe_hf_modules("mlp.experts.3.linear_fc2", true),
            std::vector<std::string>{"mlp.experts.3.down_proj"});
  EXPECT_TRUE(moe_hf_modules("mlp.linear_fc1", true).empty());  // a dense layer's: Llama's names
  // transformers v5: stacked per layer, Mixtral's router renamed.
  const FusedExpert fc1 = v5_fused_expert("layers.4.mlp.experts.7.linear_fc1.weight");
  EXPECT_EQ(fc1.tensor, "model.layers.4.mlp.experts.gate_up_proj");
  EXPECT_EQ(fc1.expert, 7);
  EXPECT_EQ(v5_fused_expert("layers.0.mlp.experts.2.linear_fc2.weight").tensor,
            "model.layers.0.mlp.experts.down_proj");
  EXPECT_TRUE(v5_fused_expert("layers.0.mlp.linear_fc1.weight").tensor.empty());
  EXPECT_EQ(v5_renamed("model.layers.3.block_sparse_moe.gate.weight"),
            "model.layers.3.mlp.gate.weight");
}

// config.json written, then read back: the same MoE model.
TEST(HfMoe, ExportedConfigReadsBackAsTheSameMoeShape) {
  json j = qwen3_moe();
  j["decoder_sparse_step"] = 2, j["mlp_only_layers"] = {3}, j["norm_topk_prob"] = true;
  const ModelConfig c = parse(j);
  const json written = json::parse(moe_config_json(c, {}).dump());
  EXPECT_EQ(written["architectures"], json::array({"Qwen3MoeForCausalLM"}));
  EXPECT_EQ(written["decoder_sparse_step"], 1);
  EXPECT_EQ(written["mlp_only_layers"], json::array({0, 2, 3, 4}));
  EXPECT_EQ(written["norm_topk_prob"], true);
  json back = j;
  for (const auto& [k, v] : written.items()) back[k] = v;
  EXPECT_EQ(moe_layers(parse(back)), moe_layers(c));

  ModelConfig dense_layer = parse(mixtral());
  dense_layer.moe.layer_pattern = {true, false, true};
  EXPECT_THROW(moe_config_json(dense_layer, {}), std::invalid_argument);
  ASSERT_EQ(moe_export_problems(dense_layer).size(), 1u);
  EXPECT_NE(moe_export_problems(dense_layer)[0].find("layers 1 dense"), std::string::npos);
}

}  // namespace
}  // namespace trident::io
