#pragma once
// HuggingFace Llama model directories (LlamaForCausalLM): config.json and model.safetensors,
// or shards model-0000x-of-0000y.safetensors named by model.safetensors.index.json. HF's
// Llama names map onto Megatron's: q_proj -> linear_q, [k_proj; v_proj] -> linear_kv,
// o_proj -> linear_proj, [gate_proj; up_proj] -> linear_fc1, down_proj -> linear_fc2. HF
// stores q and k rows already permuted for the rotate-half RoPE that trident applies, so
// they load as they are. Options HF would compute differently with (rope_scaling, a
// sliding window, another activation, ...) are refused by name.
#include <nlohmann/json.hpp>
#include <string>

#include "config/model_config.h"
#include "io/safetensors.h"
#include "parameters/parameters.h"

namespace trident::io {

// Whether a parsed config.json describes a Llama model (model_type or architectures).
bool is_llama_config(const nlohmann::json& j);
// Reads the shape and options; every problem goes to `problems`, one line each.
ModelConfig parse_llama_config(const nlohmann::json& j, std::vector<std::string>& problems);
// The Llama family as HF's LlamaForCausalLM computes it: trident's config then round-trips.
bool is_llama_model(const ModelConfig& c);

void load_llama_weights(const std::string& dir, const ModelConfig& config, Parameters& params);
// config.json + model.safetensors (one file), HF names, unpadded vocabulary; the tensors and
// config.json's torch_dtype in `dtype`.
void save_llama_model(const std::string& dir, const ModelConfig& config, const Parameters& params,
                      bool gradients, StoredDtype dtype);

// How an HF directory's weights are stored (model.safetensors or the shards of its index):
// BF16 when every weight is, F32 otherwise (an F16 or mixed file is written back as F32).
StoredDtype hf_weights_dtype(const std::string& dir);
// config.json's torch_dtype of a dtype: "float32" or "bfloat16".
const char* hf_torch_dtype(StoredDtype dtype);

}  // namespace trident::io
