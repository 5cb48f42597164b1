#pragma once
// HuggingFace mixture-of-experts directories (issue 32): Mixtral (MixtralForCausalLM, model
// type mixtral: Mistral's attention, every layer MoE, `intermediate_size` the experts' width)
// and Qwen3-MoE (Qwen3MoeForCausalLM, qwen3_moe: Qwen3's attention, experts of
// `moe_intermediate_size`, dense layers of `intermediate_size` where mlp_only_layers or
// decoder_sparse_step say so). Their routers are Megatron's two conventions: Mixtral and
// Qwen3-MoE's norm_topk_prob true renormalise the top-k softmax weights (Megatron's default),
// norm_topk_prob false keeps them (--moe-router-pre-softmax). The experts' tensors map onto
// trident's (Megatron's) names: gate -> mlp.router, [w1; w3] or [gate_proj; up_proj] ->
// experts.E.linear_fc1, w2 or down_proj -> experts.E.linear_fc2 (hf_llama.h maps the rest).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/model_config.h"

namespace trident::io {

// Whether a parsed config.json describes a Mixtral or a Qwen3-MoE model.
bool is_moe_config(const nlohmann::json& j);
bool is_mixtral_config(const nlohmann::json& j);
// Reads the shape, the attention's options and the MoE shape; every problem goes to
// `problems`, one line each.
ModelConfig parse_moe_config(const nlohmann::json& j, std::vector<std::string>& problems);

// Which HF architecture a trident MoE model is written as: Qwen3-MoE when it has Qwen3's
// per-head q/k norms (--qk-layernorm), Mixtral otherwise.
bool is_qwen3_moe_model(const ModelConfig& c);
// The HF modules (under model.layers.L.) stacked into trident's MoE module `module` of that
// layer ("mlp.router", "mlp.experts.E.linear_fc1", "mlp.experts.E.linear_fc2"); empty when
// `module` is no MoE module.
std::vector<std::string> moe_hf_modules(const std::string& module, bool qwen3_moe);

// transformers v5 holds a layer's experts fused (its checkpoint conversion mapping):
// model.layers.L.mlp.experts.gate_up_proj [E, 2I, h] (each expert's gate rows, then its up
// rows) and mlp.experts.down_proj [E, h, I], and names Mixtral's router mlp.gate. Import
// reads them where the per-expert names are absent; export writes the per-expert names,
// which every version reads.
struct FusedExpert {
  std::string tensor;  // empty: `trident_name` is no expert matrix
  int expert = 0;      // the slice [expert] of the stacked tensor
};
FusedExpert v5_fused_expert(const std::string& trident_name);
// v5's name of an HF tensor whose name it changed (Mixtral's router), or an empty string.
std::string v5_renamed(const std::string& hf_name);
// The fused and renamed tensors of layer L's MoE MLP, as v5 names them.
std::vector<std::string> v5_moe_tensors(int layer);

// Why HF cannot express an MoE model (one line each; empty: it can): train --save-hf asks
// before training, moe_config_json refuses with them.
std::vector<std::string> moe_export_problems(const ModelConfig& c);
// config.json of an MoE model, from the dense config.json `base` of its attention (Llama /
// Mistral's or Qwen3's). A model HF cannot express is refused by name
// (std::invalid_argument): Mixtral with dense layers or --moe-router-pre-softmax, biases,
// shared experts, a capacity factor, a top-k scaling factor.
nlohmann::ordered_json moe_config_json(const ModelConfig& c, nlohmann::ordered_json base);

// What config.json says about training an MoE model beyond its shape: the aux-loss
// coefficient (the default --moe-aux-loss-coeff under --load-hf) and Mixtral's router jitter
// (HF applies it in training only).
struct HfMoeTraining {
  bool mixtral = false;  // else Qwen3-MoE
  double router_aux_loss_coef = 0.001;
  double router_jitter_noise = 0.0;
};
// config.json of the directory `dir` (a problem reading it is read_hf_config's to report).
HfMoeTraining read_hf_moe_training(const std::string& dir);

}  // namespace trident::io
