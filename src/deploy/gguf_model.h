#pragma once
// A trident model as llama.cpp names it in GGUF (gguf-py's constants.py and
// convert_hf_to_gguf.py): the architecture (gpt2, llama, qwen2, qwen3), its hyperparameter
// keys, and every tensor under llama.cpp's name in ggml's [out, in] order (trident's own):
// GPT-2's fused [q; k; v] is attn_qkv; the Llama family's q, k, v, gate and up are separate
// tensors. llama.cpp's "llama" ropes adjacent pairs (its NORM RoPE), so the q and k rows of
// each head, which HF and trident keep in rotate-half order, are interleaved for it as
// convert_hf_to_gguf's permute does; qwen2 and qwen3 rope in rotate-half order (NEOX) and take
// them as they are. Norms, biases and position embeddings stay F32 (llama.cpp's rule for 1-D
// tensors and those names); a Q8_0 tensor whose rows are not a multiple of 32 falls back to
// F16, as convert_hf_to_gguf does.
#include <string>
#include <vector>

#include "config/model_config.h"
#include "deploy/gguf_file.h"
#include "parameters/parameters.h"

namespace trident::deploy {

// --outtype: the type of the model's matrices.
enum class OutType { kF32, kF16, kBF16, kQ8_0 };
// "f32", "f16", "bf16", "q8_0"; a FormatError naming the flag otherwise.
OutType parse_outtype(const std::string& name);
const char* outtype_name(OutType t);

// llama.cpp's architecture for the model, or a FormatError naming the rule the model breaks.
std::string gguf_architecture(const ModelConfig& c);

// The model's general.* and <arch>.* keys and its tensors into w; `whole` (the one-process
// model's parameters, gathered) must outlive w's write. Returns what the export changed
// (fallbacks), one line each, for the log.
std::vector<std::string> add_model(GgufWriter& w, const ModelConfig& c, const Parameters& whole,
                                   OutType type, const std::string& name);

// Rows of a [heads x head_dim, cols] q or k matrix reordered per head from rotate-half
// (first half, second half) to adjacent pairs: new row 2i + j of a head is old row
// j * head_dim / 2 + i (convert_hf_to_gguf's permute).
std::vector<float> interleave_rope_rows(const float* x, long heads, long head_dim, long cols);

}  // namespace trident::deploy
