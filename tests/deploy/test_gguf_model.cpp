// The Llama export's RoPE row interleaving and the architectures llama.cpp names (or not).
#include <gtest/gtest.h>

#include "core/files.h"
#include "deploy/gguf_model.h"

namespace trident::deploy {
namespace {

TEST(GgufModel, RopeRowsInterleavePerHead) {
  // Two heads of dim 4, one column: rotate-half rows [a0 a1 b0 b1] become [a0 b0 a1 b1].
  const std::vector<float> x = {0, 1, 2, 3, 10, 11, 12, 13};
  EXPECT_EQ(interleave_rope_rows(x.data(), 2, 4, 0),
            (std::vector<float>{0, 2, 1, 3, 10, 12, 11, 13}));
}

TEST(GgufModel, RefusesWhatLlamaCppCannotName) {
  EXPECT_THROW(parse_outtype("q4_0"), FormatError);
  ModelConfig gpt2;
  EXPECT_EQ(gguf_architecture(gpt2), "gpt2");
  ModelConfig mixed = gpt2;
  mixed.position_embedding_type = "rope";
  EXPECT_THROW(gguf_architecture(mixed), FormatError);
  ModelConfig llama = mixed;
  llama.normalization = "RMSNorm";
  llama.swiglu = true;
  EXPECT_EQ(gguf_architecture(llama), "llama");
  llama.disable_bias_linear = true;
  llama.add_qkv_bias = true;
  EXPECT_EQ(gguf_architecture(llama), "qwen2");
  llama.add_qkv_bias = false;
  llama.qk_layernorm = true;
  EXPECT_EQ(gguf_architecture(llama), "qwen3");
  llama.moe.num_experts = 4;
  EXPECT_THROW(gguf_architecture(llama), FormatError);
}

}  // namespace
}  // namespace trident::deploy
