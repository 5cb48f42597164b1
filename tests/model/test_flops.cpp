// Model FLOPs: the paper's formula for GPT-2's block, and MoE layers counted by their active
// experts (Megatron's moe_layer_flops) plus the router.
#include <gtest/gtest.h>

#include "model/flops.h"

namespace trident {
namespace {

ModelConfig gpt() {
  ModelConfig c;
  c.num_layers = 4, c.hidden_size = 64, c.num_attention_heads = 4, c.seq_length = 32;
  return c;
}

TEST(Flops, Gpt2BlockIsThePapersFormula) {
  const ModelConfig c = gpt();
  const double B = 8, s = 32, l = 4, h = 64, V = 512;
  const double paper = 72 * B * s * l * h * h * (1 + s / (6 * h)) + 6 * B * s * h * V;
  EXPECT_NEAR(training_flops_per_iteration(c, 8, 32, 512), paper, 1e-9 * paper);
}

TEST(Flops, MoeLayersCountTheirKExpertsAndTheRouter) {
  ModelConfig dense = gpt();
  dense.swiglu = true;  // ffn 4h: fc1 2 x 4h rows, fc2 4h columns, 24 h^2 per token
  ModelConfig c = dense;
  c.moe.num_experts = 8, c.moe.router_topk = 2, c.moe.ffn_hidden_size = 96;
  c.moe.layer_pattern = {true, false, true, false};
  const double B = 8, s = 32, h = 64;
  // Per token forward: an MoE layer is 2 x (2 h 2F + 2 F h) + 2 h E.
  const double dense_mlp = 24 * h * h, moe_mlp = 2 * (2 * h * 192 + 2 * 96 * h) + 2 * h * 8;
  const double want =
      training_flops_per_iteration(dense, 8, 32, 512) + 3 * B * s * 2 * (moe_mlp - dense_mlp);
  EXPECT_NEAR(training_flops_per_iteration(c, 8, 32, 512), want, 1e-9 * want);
}

}  // namespace
}  // namespace trident
