// check_moe: expert parallelism against the data-parallel size, ETP, sequence parallelism,
// the dispatcher and load-balancing types trident refuses by name, the coefficients. t > 1
// with sequence parallelism, with EP, bf16, fp16, zb-h1, token dropping and shared experts are
// built.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "train/moe_rules.h"
#include "train/training_config.h"

namespace trident::train {
namespace {

std::vector<std::string> moe_errors(const TrainingConfig& c) {
  std::vector<std::string> errors;
  check_moe(c, errors);
  return errors;
}

bool mentions(const std::vector<std::string>& errors, const std::string& text) {
  for (const std::string& e : errors)
    if (e.find(text) != std::string::npos) return true;
  return false;
}

// t = 2, p = 1, d = 4 on 8 ranks, 8 experts over EP = 2.
TrainingConfig moe_run() {
  TrainingConfig c;
  c.world_size = 8, c.tensor_model_parallel_size = 2, c.sequence_parallel = true;
  c.model.moe.num_experts = 8, c.expert_model_parallel_size = 2;
  return c;
}

const char* const kNotBuilt = "is not built yet (issue 32)";

TEST(MoeRules, ADenseRunAndAValidMoeRunHaveNoError) {
  EXPECT_TRUE(moe_errors(TrainingConfig{}).empty());
  EXPECT_TRUE(moe_errors(moe_run()).empty());  // t = 2 with sequence parallelism, EP = 2
  TrainingConfig ep_at_t1 = moe_run();         // d = 8, EP = 2
  ep_at_t1.tensor_model_parallel_size = 1, ep_at_t1.sequence_parallel = false;
  EXPECT_TRUE(moe_errors(ep_at_t1).empty());
  TrainingConfig dense;
  dense.expert_model_parallel_size = 2;
  EXPECT_TRUE(mentions(moe_errors(dense), "--expert-model-parallel-size 2 needs --num-experts"));
}

TEST(MoeRules, ExpertLayoutRules) {
  TrainingConfig c = moe_run();
  c.expert_model_parallel_size = 3;  // divides neither 8 experts nor d = 4
  c.expert_tensor_parallel_size = 1;
  c.sequence_parallel = false;
  const auto e = moe_errors(c);
  EXPECT_EQ(e.size(), 4u);
  EXPECT_TRUE(
      mentions(e, "--num-experts (8) must be divisible by --expert-model-parallel-size (3)"));
  EXPECT_TRUE(
      mentions(e, "--expert-model-parallel-size (3) must divide t x d / ETP (2 x 4 / 1 = 8"));
  EXPECT_TRUE(mentions(e,
                       "--expert-tensor-parallel-size 1 with --tensor-model-parallel-size 2: "
                       "--expert-model-parallel-size (3) must be a multiple of t"));
  EXPECT_TRUE(mentions(e,
                       "--num-experts with --tensor-model-parallel-size 2 needs "
                       "--sequence-parallel (Megatron's rule"));
  EXPECT_FALSE(mentions(e, kNotBuilt));
  c = moe_run();
  c.expert_tensor_parallel_size = 2;  // given as t: accepted
  EXPECT_TRUE(moe_errors(c).empty());
  c.expert_tensor_parallel_size = 1;  // whole experts, EP 2 of t x d = 8 ranks: accepted
  EXPECT_TRUE(moe_errors(c).empty());
  c.expert_model_parallel_size = 8;  // EP up to t x d / ETP
  EXPECT_TRUE(moe_errors(c).empty());
  c.expert_model_parallel_size = 16;
  EXPECT_TRUE(mentions(moe_errors(c), "--expert-model-parallel-size (16) must divide t x d / ETP"));
  c.expert_model_parallel_size = 2;
  c.expert_tensor_parallel_size = 3;
  EXPECT_TRUE(
      mentions(moe_errors(c),
               "--expert-tensor-parallel-size (3) must divide --tensor-model-parallel-size (2)"));
  c.expert_tensor_parallel_size = 1;
  c.model.moe.shared_expert_intermediate_size = 16;
  EXPECT_TRUE(mentions(moe_errors(c), "--moe-shared-expert-intermediate-size is not built"));
  c = moe_run();
  c.tensor_model_parallel_size = 4, c.world_size = 16, c.expert_tensor_parallel_size = 2;
  EXPECT_TRUE(mentions(moe_errors(c), "--expert-tensor-parallel-size 2 is not built"));
  c.expert_model_parallel_size = 0;
  EXPECT_TRUE(mentions(moe_errors(c), "--expert-model-parallel-size must be >= 1"));
}

TEST(MoeRules, DispatcherAndBalancingTypesAreRefusedByName) {
  for (const char* d : {"allgather", "flex"}) {
    TrainingConfig c = moe_run();
    c.moe_token_dispatcher_type = d;
    EXPECT_TRUE(mentions(moe_errors(c), std::string("--moe-token-dispatcher-type ") + d +
                                            " is not implemented in trident"));
  }
  for (const char* t : {"seq_aux_loss", "global_aux_loss", "sinkhorn", "quantile_balancing"}) {
    TrainingConfig c = moe_run();
    c.moe_router_load_balancing_type = {t};
    EXPECT_TRUE(mentions(moe_errors(c), std::string("--moe-router-load-balancing-type ") + t +
                                            " is not implemented in trident"));
  }
  TrainingConfig c = moe_run();
  c.moe_router_load_balancing_type = {"aux_loss", "none"};
  c.moe_aux_loss_coeff = {0.01f, 0.f, 0.f};
  auto e = moe_errors(c);
  EXPECT_TRUE(mentions(e, "--moe-router-load-balancing-type: give one type"));
  EXPECT_TRUE(mentions(e, "one per --moe-router-load-balancing-type (2), got 3"));
}

TEST(MoeRules, Coefficients) {
  TrainingConfig c = moe_run();
  c.moe_router_load_balancing_type = {"none"};
  c.moe_aux_loss_coeff = {0.01f};
  c.moe_z_loss_coeff = -1.f;
  c.moe_input_jitter_eps = 0.01f;
  auto e = moe_errors(c);
  EXPECT_EQ(e.size(), 3u);
  EXPECT_TRUE(mentions(e,
                       "--moe-aux-loss-coeff > 0 needs --moe-router-load-balancing-type "
                       "aux_loss (got none)"));
  EXPECT_TRUE(mentions(e, "--moe-z-loss-coeff must be >= 0"));
  EXPECT_TRUE(mentions(e, "--moe-input-jitter-eps is not implemented"));
  c = moe_run();
  c.moe_aux_loss_coeff = {-0.5f};
  EXPECT_TRUE(mentions(moe_errors(c), "--moe-aux-loss-coeff must be >= 0 and finite"));
}

// What issue 32 builds: any EP, t, p and d, fp32, bf16 or fp16, 1F1B or zb-h1, dropless or
// with a capacity (padded or not), shared experts (gated or not), with the aux and z losses.
TEST(MoeRules, OneTensorParallelRankInFp32Bf16OrFp16IsAccepted) {
  TrainingConfig c;
  c.world_size = 4, c.pipeline_model_parallel_size = 2;
  c.model.moe.num_experts = 4, c.moe_aux_loss_coeff = {0.01f}, c.moe_z_loss_coeff = 0.001f;
  EXPECT_TRUE(moe_errors(c).empty());
  c.model.moe.expert_capacity_factor = 1.25f, c.model.moe.pad_expert_input_to_capacity = true;
  c.model.moe.shared_expert_intermediate_size = 64, c.model.moe.shared_expert_gate = true;
  EXPECT_TRUE(moe_errors(c).empty());
  c.bf16 = true;
  EXPECT_TRUE(moe_errors(c).empty());
  c.pipeline_schedule = "zb-h1";
  EXPECT_TRUE(moe_errors(c).empty());
  c.bf16 = false, c.fp16 = true;
  EXPECT_TRUE(moe_errors(c).empty());
}

// A Llama-block MoE model for the HF rules.
TrainingConfig llama_moe_run() {
  TrainingConfig c;
  c.model.num_layers = 2, c.model.normalization = "RMSNorm";
  c.model.position_embedding_type = "rope", c.model.swiglu = true;
  c.model.group_query_attention = true, c.model.disable_bias_linear = true;
  c.model.moe.num_experts = 4;
  return c;
}

// Step 4: HF import, export and generation are built; an export HF cannot express is refused
// before training, naming the architecture it would be.
TEST(MoeRules, HfExportIsRefusedBeforeTrainingOnlyWhereHfCannotExpressTheModel) {
  TrainingConfig c = llama_moe_run();
  c.save_hf = "out", c.load_hf = "in", c.sample_prompt = "In the beginning";
  EXPECT_TRUE(moe_errors(c).empty());
  c.model.moe.layer_pattern = {true, false};
  c.model.moe.router_pre_softmax = true;
  auto e = moe_errors(c);
  EXPECT_EQ(e.size(), 2u);
  EXPECT_TRUE(mentions(e,
                       "--save-hf (as MixtralForCausalLM): --moe-layer-freq makes layers 1 "
                       "dense"));
  EXPECT_TRUE(mentions(e, "--save-hf (as MixtralForCausalLM): --moe-router-pre-softmax"));
  c.model.qk_layernorm = true;  // Qwen3-MoE says both (mlp_only_layers, norm_topk_prob)
  EXPECT_TRUE(moe_errors(c).empty());
  c.model.moe.router_topk_scaling_factor = 2.f;
  EXPECT_TRUE(mentions(moe_errors(c),
                       "--save-hf (as Qwen3MoeForCausalLM): "
                       "--moe-router-topk-scaling-factor"));
  c = llama_moe_run();
  c.model.swiglu = false, c.save_hf = "out";
  EXPECT_TRUE(mentions(moe_errors(c), "--save-hf (as MixtralForCausalLM): the block"));
  c.save_hf.clear();  // without an export, the GeLU experts are fine
  EXPECT_TRUE(moe_errors(c).empty());
}

}  // namespace
}  // namespace trident::train
