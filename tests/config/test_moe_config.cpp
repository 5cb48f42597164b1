// The MoE shape's rules (validate_moe_config): each broken rule reported with its flag, all
// at once, and a valid shape accepted; which layers are MoE and how wide an expert is.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/model_config.h"

namespace trident {
namespace {

std::vector<std::string> moe_errors(const ModelConfig& c, int t = 1) {
  std::vector<std::string> errors;
  validate_moe_config(c, t, errors);
  return errors;
}

bool mentions(const std::vector<std::string>& errors, const std::string& text) {
  for (const std::string& e : errors)
    if (e.find(text) != std::string::npos) return true;
  return false;
}

ModelConfig moe_model() {
  ModelConfig c;
  c.num_layers = 4, c.hidden_size = 64, c.num_attention_heads = 2;
  c.moe.num_experts = 8, c.moe.router_topk = 2;
  return c;
}

TEST(MoeConfig, AValidShapeHasNoErrorAndNoExpertsMeansDense) {
  EXPECT_TRUE(moe_errors(moe_model(), 2).empty());
  EXPECT_TRUE(validate_model_config(moe_model(), 2).empty());
  ModelConfig dense;
  EXPECT_FALSE(dense.moe.enabled());
  for (int l = 0; l < dense.num_layers; ++l) EXPECT_FALSE(dense.is_moe_layer(l));
  dense.moe.router_topk = 99;  // the shape's other fields mean nothing without experts
  EXPECT_TRUE(moe_errors(dense).empty());
}

TEST(MoeConfig, LayersAndExpertWidth) {
  ModelConfig c = moe_model();
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(c.is_moe_layer(l));  // empty pattern: every layer
  c.moe.layer_pattern = {true, false, false, true};
  EXPECT_TRUE(c.is_moe_layer(0) && !c.is_moe_layer(1) && !c.is_moe_layer(2) && c.is_moe_layer(3));
  c.ffn_hidden_size = 96;
  EXPECT_EQ(c.moe_ffn(), 96);  // Megatron's default: the dense MLP's width
  c.moe.ffn_hidden_size = 40;
  EXPECT_EQ(c.moe_ffn(), 40);
}

TEST(MoeConfig, EveryBrokenRuleNamesItsFlag) {
  ModelConfig c = moe_model();
  c.moe.router_topk = 9;
  c.moe.router_score_function = "sigmoid";
  c.moe.pad_expert_input_to_capacity = true;
  c.moe.token_drop_policy = "random";
  c.moe.layer_pattern = {true, false};
  c.moe.ffn_hidden_size = 33;
  c.moe.shared_expert_gate = true;
  c.moe.router_topk_scaling_factor = -1.f;
  const auto e = moe_errors(c, 2);
  EXPECT_EQ(e.size(), 8u);
  EXPECT_TRUE(mentions(e, "--moe-router-topk (9) must be in [1, --num-experts] (8)"));
  EXPECT_TRUE(mentions(e, "--moe-router-score-function sigmoid is not implemented"));
  EXPECT_TRUE(mentions(e, "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor"));
  EXPECT_TRUE(mentions(e, "--moe-token-drop-policy must be probs or position (got 'random')"));
  EXPECT_TRUE(mentions(e, "--moe-layer-freq gives 2 layers; --num-layers is 4"));
  EXPECT_TRUE(mentions(e, "33) must be divisible by --tensor-model-parallel-size (2)"));
  EXPECT_TRUE(mentions(e, "--moe-shared-expert-gate needs --moe-shared-expert-intermediate-size"));
  EXPECT_TRUE(mentions(e, "--moe-router-topk-scaling-factor must be >= 0"));
}

TEST(MoeConfig, TopOneNeedsPreSoftmaxAndCapacityMustBePositive) {
  ModelConfig c = moe_model();
  c.moe.router_topk = 1;
  EXPECT_TRUE(mentions(moe_errors(c), "--moe-router-topk 1 needs --moe-router-pre-softmax"));
  c.moe.router_pre_softmax = true;
  EXPECT_TRUE(moe_errors(c).empty());
  c.moe.expert_capacity_factor = 0.f;
  EXPECT_TRUE(mentions(moe_errors(c), "--moe-expert-capacity-factor must be > 0"));
  c.moe.expert_capacity_factor = 1.25f, c.moe.pad_expert_input_to_capacity = true;
  EXPECT_TRUE(moe_errors(c).empty());
  c.moe.layer_pattern = {false, false, false, false};
  EXPECT_TRUE(mentions(moe_errors(c), "--moe-layer-freq makes no layer MoE"));
  c.moe.num_experts = -2;
  EXPECT_TRUE(mentions(moe_errors(c), "--num-experts must be >= 0 (got -2"));
}

}  // namespace
}  // namespace trident
