#pragma once
// HuggingFace Qwen2 and Qwen3 model directories (Qwen2ForCausalLM, Qwen3ForCausalLM): the
// Llama layout (see hf_llama.h) with Qwen's differences. Qwen2: biases on q_proj, k_proj and
// v_proj only (Megatron's --add-qkv-bias with --disable-bias-linear); its sliding_window is
// accepted while use_sliding_window is false (HF then ignores it). Qwen3: no biases, an
// RMSNorm of each query and key head before RoPE (self_attn.q_norm / k_norm, Megatron's
// self_attention.q_layernorm / k_layernorm, --qk-layernorm) and an explicit head_dim
// (--kv-channels). Options HF would compute differently with are refused by name.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/model_config.h"

namespace trident::io {

// Whether a parsed config.json says model_type `model_type` or lists `architecture` among its
// architectures.
bool config_names(const nlohmann::json& j, const char* model_type, const char* architecture);
// Whether a parsed config.json describes a Qwen2 or Qwen3 model (model_type or architectures).
bool is_qwen_config(const nlohmann::json& j);
// Reads the shape and options; every problem goes to `problems`, one line each.
ModelConfig parse_qwen_config(const nlohmann::json& j, std::vector<std::string>& problems);
// A model with one of Qwen's options (q/k/v-only biases, q/k norms); an explicit head width
// alone is Llama's or Mistral's head_dim.
bool is_qwen_model(const ModelConfig& c);
// config.json of a Qwen model (Qwen2 or Qwen3 by its options); throws std::invalid_argument
// naming the options when they match neither.
nlohmann::ordered_json qwen_config_json(const ModelConfig& c);

}  // namespace trident::io
