// ModelConfig: the Qwen presets against the published models (the parameter counts of their
// HF checkpoints: Qwen2.5-0.5B 494,032,768, "0.49B" on its model card; Qwen3-0.6B
// 596,049,920, "0.6B", 0.44B without the embedding), which ParameterLayout must also give
// tensor by tensor; the Qwen options' validation rules; the presets of Llama 3.x and
// Mistral (the published config.json values); and the attention keys the FLOP model counts
// with a sliding window, against counting the (query, key) pairs a window keeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "config/model_config.h"
#include "parameters/parameter_layout.h"

namespace trident {
namespace {

long layout_count(const ModelConfig& c) {
  const ParameterLayout layout(c, {0, 1});
  long n = 0;
  for (const ParamSpec& s : layout.specs()) n += s.numel();
  return n;
}

TEST(QwenPresets, ParameterCountsArePublishedOnes) {
  const ModelConfig qwen2 = preset_model("qwen2.5-0.5b"), qwen3 = preset_model("qwen3-0.6b");
  EXPECT_EQ(qwen2.parameter_count(1), 494032768L);
  EXPECT_EQ(layout_count(qwen2), 494032768L);
  EXPECT_EQ(qwen3.parameter_count(1), 596049920L);
  EXPECT_EQ(layout_count(qwen3), 596049920L);
  EXPECT_EQ(qwen3.head_dim(), 128);
  EXPECT_EQ(qwen3.attention_width(), 2048);  // wider than hidden (1024)
  EXPECT_TRUE(validate_model_config(qwen2, 2).empty());
  EXPECT_TRUE(validate_model_config(qwen3, 2).empty());
}

TEST(QwenPresets, LayoutShapesFollowKvChannels) {
  const ModelConfig c = preset_model("qwen3-0.6b");
  const ParameterLayout layout(c, {1, 2});
  EXPECT_EQ(layout.find("layers.0.self_attention.linear_q.weight").local_shape,
            (std::vector<long>{1024, 1024}));
  EXPECT_EQ(layout.find("layers.0.self_attention.linear_proj.weight").local_shape,
            (std::vector<long>{1024, 1024}));
  EXPECT_EQ(layout.find("layers.0.self_attention.linear_kv.weight").local_shape,
            (std::vector<long>{1024, 1024}));
  EXPECT_EQ(layout.find("layers.0.self_attention.q_layernorm.weight").local_shape,
            (std::vector<long>{128}));
  EXPECT_FALSE(layout.contains("layers.0.self_attention.linear_q.bias"));
  const ParameterLayout qwen2(preset_model("qwen2.5-0.5b"), {0, 2});
  EXPECT_EQ(qwen2.find("layers.0.self_attention.linear_q.bias").local_shape,
            (std::vector<long>{448}));
  EXPECT_EQ(qwen2.find("layers.0.self_attention.linear_kv.bias").local_shape,
            (std::vector<long>{128}));
  EXPECT_FALSE(qwen2.contains("layers.0.self_attention.linear_proj.bias"));
  EXPECT_FALSE(qwen2.contains("layers.0.mlp.linear_fc1.bias"));
}

bool mentions(const std::vector<std::string>& errors, const std::string& text) {
  return std::any_of(errors.begin(), errors.end(),
                     [&](const std::string& e) { return e.find(text) != std::string::npos; });
}

TEST(QwenOptions, ValidationNamesTheFlag) {
  ModelConfig c;
  c.kv_channels = -1;
  EXPECT_TRUE(mentions(validate_model_config(c, 1), "--kv-channels must be > 0"));
  c.kv_channels = 0;
  c.qk_layernorm = true;  // LayerNorm block
  EXPECT_TRUE(mentions(validate_model_config(c, 1), "--qk-layernorm"));
  // An explicit head width lifts hidden % heads.
  ModelConfig wide;
  wide.hidden_size = 100, wide.num_attention_heads = 8, wide.kv_channels = 16;
  EXPECT_FALSE(mentions(validate_model_config(wide, 1), "divisible by --num-attention-heads"));
}

TEST(ModelPresets, PublishedShapesAreValid) {
  for (const char* name : {"llama3.2-1b", "llama3.1-8b", "mistral-7b"}) {
    const ModelConfig c = preset_model(name);
    EXPECT_TRUE(validate_model_config(c, 1).empty()) << name;
    EXPECT_TRUE(c.rms_norm() && c.rope() && c.swiglu && c.group_query_attention) << name;
  }
  const ModelConfig llama = preset_model("llama3.2-1b");
  EXPECT_EQ(llama.hidden_size, 2048);
  EXPECT_EQ(llama.num_query_groups, 8);
  EXPECT_TRUE(llama.use_rope_scaling && llama.tied_output());
  EXPECT_EQ(llama.rope_scaling_factor, 32.f);
  const ModelConfig mistral = preset_model("mistral-7b");
  EXPECT_EQ(mistral.window_size, 4096);
  EXPECT_FALSE(mistral.use_rope_scaling);
  EXPECT_THROW(preset_model("llama4"), std::invalid_argument);
}

TEST(ModelConfig, AttentionKeysCountTheWindowsPairs) {
  ModelConfig c;
  EXPECT_EQ(c.attention_keys(2048), 2048);  // no window: Megatron's whole square
  for (int seq : {7, 100, 2048})
    for (int w : {1, 5, 512, 4096}) {
      c.window_size = w;
      long kept = 0, causal = 0;
      for (int i = 0; i < seq; ++i)
        for (int j = 0; j <= i; ++j) {
          ++causal;
          kept += i - w < j;
        }
      EXPECT_NEAR(c.attention_keys(seq), (double)seq * kept / causal, 1e-9 * seq)
          << seq << " " << w;
    }
}

TEST(ModelConfig, RopeScalingAndWindowRules) {
  ModelConfig c;
  c.use_rope_scaling = true, c.rope_scaling_factor = 0.f, c.window_size = -1;
  std::string all;
  for (const std::string& e : validate_model_config(c, 1)) all += e + "\n";
  EXPECT_NE(all.find("--use-rope-scaling needs --position-embedding-type rope"), std::string::npos);
  EXPECT_NE(all.find("--rope-scaling-factor must be > 0"), std::string::npos);
  EXPECT_NE(all.find("--window-size must be >= 0"), std::string::npos);
}

}  // namespace
}  // namespace trident
