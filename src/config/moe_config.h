#pragma once
// The mixture-of-experts shape of a model (Megatron-Core's MoE fields, without their moe_
// prefix): how many experts, how a token picks its k, which layers are MoE, how wide an
// expert is. Plain facts; the rules that tie them to the parallel layout live with the
// training configuration (train/moe_rules.h).
#include <string>
#include <vector>

namespace trident {

struct MoeConfig {
  int num_experts = 0;  // --num-experts; 0: no MoE layer (Megatron's None)
  int router_topk = 2;  // --moe-router-topk: k experts per token
  // --moe-layer-freq resolved per layer (config/moe_layer_freq.h): layer l is MoE iff
  // layer_pattern[l]. Empty: every layer (Megatron's default, --moe-layer-freq 1).
  std::vector<bool> layer_pattern;
  int ffn_hidden_size = 0;  // --moe-ffn-hidden-size: each expert's width; 0: the dense MLP's
  // --moe-router-pre-softmax: softmax over all E, then top-k, weights kept as they are.
  // Off (Megatron's default): top-k of the logits, then softmax over the k (the same as a
  // softmax over E, top-k and renormalising the k weights to sum to 1).
  bool router_pre_softmax = false;
  std::string router_score_function = "softmax";  // --moe-router-score-function
  float router_topk_scaling_factor = 0.f;         // multiplies the k weights; 0: none
  int shared_expert_intermediate_size = 0;        // total width of the shared experts; 0: none
  bool shared_expert_gate = false;                // sigmoid gate on the shared experts (Qwen2)
  float expert_capacity_factor = -1.f;            // < 0: dropless (Megatron's None)
  bool pad_expert_input_to_capacity = false;
  std::string token_drop_policy = "probs";  // probs or position, with a capacity factor

  bool enabled() const { return num_experts > 0; }
  bool dropless() const { return expert_capacity_factor < 0.f; }
};

}  // namespace trident
