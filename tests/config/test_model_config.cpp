// ModelConfig's presets of today's open models (the published config.json values) and the
// attention keys the FLOP model counts with a sliding window, against counting the (query,
// key) pairs a window keeps.
#include <gtest/gtest.h>

#include "config/model_config.h"

namespace trident {
namespace {

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
