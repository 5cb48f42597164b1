#pragma once
// HuggingFace GPT-2 model directories: config.json (n_layer, n_embd, n_head, vocab_size,
// n_positions, layer_norm_epsilon) and model.safetensors with HF names (wte.weight,
// h.N.attn.c_attn.weight in Conv1D [in, out] layout, ..., ln_f.bias; an optional
// "transformer." prefix). trident's own layout is [out, in]; conversion happens here only.
#include <string>

#include "config/model_config.h"
#include "io/safetensors.h"
#include "parameters/parameters.h"

namespace trident::io {

// Reads and checks config.json; throws FormatError naming the file and the key. Options
// under which HF computes another function (untied output layer, attention scaled by the
// layer index or not at all, another activation, cross-attention, another model type or
// architecture) are refused, all of them in one message, one line each.
ModelConfig read_hf_config(const std::string& dir);
// The same for the text of a config.json (`path` names it in messages).
ModelConfig parse_hf_config(const std::string& text, const std::string& path);

// Fills this rank's shards from model.safetensors (every tensor checked for shape); an
// lm_head.weight that is not a bit-for-bit copy of wte.weight is refused.
void load_hf_weights(const std::string& dir, const ModelConfig& config, Parameters& params);

// Writes config.json and model.safetensors (one-rank parameters, unpadded vocabulary).
// Tensors named in `which` come from `source` (values or grads of params).
// The tensors are stored in `dtype` (BF16 rounded to nearest even) and config.json's
// torch_dtype says which.
void save_hf_model(const std::string& dir, const ModelConfig& config, const Parameters& params,
                   bool gradients = false, StoredDtype dtype = StoredDtype::kF32);

// The HF name of a trident parameter and whether its matrix is stored transposed there.
struct HfName {
  std::string name;
  bool transposed;
};
HfName hf_name_for(const std::string& trident_name);

}  // namespace trident::io
