#pragma once
// The options of HF's Llama-family config.json beyond Llama 2's: rope_scaling (Llama 3.x's
// llama3 type, and linear) and a sliding window (MistralForCausalLM's sliding_window; Qwen2's
// behind use_sliding_window), read into ModelConfig and written back.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/model_config.h"

namespace trident::io {

// model_type "mistral" or architectures naming MistralForCausalLM.
bool is_mistral_config(const nlohmann::json& j);

// rope_scaling: null, rope_type "default", "llama3" (factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings) or "linear" (factor). Another type
// (dynamic, yarn, longrope, ...) is a problem naming it.
void parse_rope_scaling(const nlohmann::json& j, ModelConfig& c,
                        std::vector<std::string>& problems);

// sliding_window W: Mistral's applies to every layer; with use_sliding_window false (Qwen2)
// it is off; layer_types / max_window_layers that window only some layers are a problem, as
// is a window on LlamaForCausalLM (whose HF code has none).
void parse_sliding_window(const nlohmann::json& j, ModelConfig& c,
                          std::vector<std::string>& problems);

// config.json's "rope_scaling": null, or the object HF reads back to the same frequencies.
nlohmann::ordered_json rope_scaling_json(const ModelConfig& c);

// A model with a sliding window is written as MistralForCausalLM (sliding_window W); HF's
// Mistral has no biases, so a model with them is refused (std::invalid_argument).
void as_mistral(const ModelConfig& c, nlohmann::ordered_json& cfg);

}  // namespace trident::io
