#include "deploy/gguf_model.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/files.h"
#include "deploy/gguf_encode.h"
#include "kernels/rope.h"
#include "model/transformer_layer.h"

namespace trident::deploy {

namespace {

bool is_gpt2_block(const ModelConfig& c) {
  return !c.rms_norm() && c.learned_positions() && !c.swiglu && !c.group_query_attention &&
         c.add_bias_linear() && c.attention_width() == c.hidden_size && !c.qk_layernorm;
}

bool is_llama_block(const ModelConfig& c) {
  return c.rms_norm() && c.rope() && c.swiglu;
}

// llama.cpp's file types (llama.h's LLAMA_FTYPE_*), general.file_type.
std::uint32_t file_type(OutType t) {
  switch (t) {
    case OutType::kF32:
      return 0;
    case OutType::kF16:
      return 1;
    case OutType::kQ8_0:
      return 7;
    case OutType::kBF16:
      return 32;
  }
  return 0;
}

GgmlType matrix_type(OutType t) {
  switch (t) {
    case OutType::kF32:
      return GgmlType::kF32;
    case OutType::kF16:
      return GgmlType::kF16;
    case OutType::kBF16:
      return GgmlType::kBF16;
    case OutType::kQ8_0:
      return GgmlType::kQ8_0;
  }
  return GgmlType::kF32;
}

// A GGUF tensor's floats: `rows` rows of `cols` (cols 0: a 1-D tensor of `rows`) from `data`;
// heads > 0: each head's rows interleaved for llama.cpp's NORM RoPE.
struct Source {
  const float* data;
  long rows, cols;
  long heads = 0, head_dim = 0;
};

// Adds one tensor: F32 for 1-D tensors, norms and position embeddings, else `type` (Q8_0
// falling back to F16 when a row is not whole blocks).
void add(GgufWriter& w, std::vector<std::string>& notes, const std::string& name, Source s,
         OutType type) {
  std::vector<long> shape = s.cols ? std::vector<long>{s.rows, s.cols} : std::vector<long>{s.rows};
  GgmlType t = matrix_type(type);
  if (!s.cols || name.ends_with("_norm.weight") || name == "position_embd.weight")
    t = GgmlType::kF32;
  if (t == GgmlType::kQ8_0 && s.cols % kQ8BlockSize) {
    t = GgmlType::kF16;
    notes.push_back(name + ": rows of " + std::to_string(s.cols) +
                    " values are not whole Q8_0 blocks of 32: written F16");
  }
  w.add_tensor({name, shape, t, [s, t] {
                  const long n = s.rows * std::max(s.cols, 1L);
                  if (!s.heads) return encode_tensor(s.data, n, t);
                  const std::vector<float> x =
                      interleave_rope_rows(s.data, s.heads, s.head_dim, s.cols);
                  return encode_tensor(x.data(), n, t);
                }});
}

}  // namespace

OutType parse_outtype(const std::string& name) {
  if (name == "f32") return OutType::kF32;
  if (name == "f16") return OutType::kF16;
  if (name == "bf16") return OutType::kBF16;
  if (name == "q8_0") return OutType::kQ8_0;
  throw FormatError("--outtype " + name + ": must be f32, f16, bf16 or q8_0");
}

const char* outtype_name(OutType t) {
  switch (t) {
    case OutType::kF32:
      return "f32";
    case OutType::kF16:
      return "f16";
    case OutType::kBF16:
      return "bf16";
    case OutType::kQ8_0:
      return "q8_0";
  }
  return "?";
}

std::string gguf_architecture(const ModelConfig& c) {
  if (c.moe.enabled())
    throw FormatError(
        "--to gguf: mixture-of-experts models are not exported (trident writes llama.cpp's "
        "gpt2, llama, qwen2 and qwen3)");
  if (is_gpt2_block(c)) return "gpt2";
  if (!is_llama_block(c))
    throw FormatError(
        "--to gguf: llama.cpp names GPT-2 (LayerNorm, learned positions, GeLU, biases, one "
        "key/value head per query head) and the Llama family (RMSNorm, rope, SwiGLU); this "
        "model mixes the two");
  if (c.rotary_percent != 1.f)
    throw FormatError("--to gguf: --rotary-percent " + std::to_string(c.rotary_percent) +
                      ": llama.cpp's llama, qwen2 and qwen3 rotate every dimension of a head");
  if (c.qk_layernorm && (c.add_qkv_bias || c.add_bias_linear()))
    throw FormatError("--to gguf: --qk-layernorm with biases: llama.cpp's qwen3 has no biases");
  const std::string arch = c.qk_layernorm                             ? "qwen3"
                           : (c.add_qkv_bias && !c.add_bias_linear()) ? "qwen2"
                                                                      : "llama";
  if (arch != "llama" && c.use_rope_scaling && c.rope_scaling_type != "linear")
    throw FormatError("--to gguf: llama3 RoPE scaling on " + arch +
                      ": llama.cpp applies its frequency factors to llama only");
  return arch;
}

std::vector<float> interleave_rope_rows(const float* x, long heads, long head_dim, long cols) {
  const long width = std::max(cols, 1L), half = head_dim / 2;
  std::vector<float> out((size_t)heads * head_dim * width);
  for (long h = 0; h < heads; ++h)
    for (long i = 0; i < half; ++i)
      for (long j = 0; j < 2; ++j)
        std::memcpy(&out[((h * head_dim) + 2 * i + j) * width],
                    x + ((h * head_dim) + j * half + i) * width, width * sizeof(float));
  return out;
}

namespace {

// <arch>.* hyperparameters (gguf-py's Keys.LLM, Keys.Attention, Keys.Rope).
void add_hyperparameters(GgufWriter& w, const ModelConfig& c, const std::string& arch,
                         std::vector<std::string>& notes) {
  auto u32 = [](long v) { return (std::uint32_t)v; };
  w.set(arch + ".context_length", u32(c.max_positions()));
  w.set(arch + ".embedding_length", u32(c.hidden_size));
  w.set(arch + ".block_count", u32(c.num_layers));
  w.set(arch + ".feed_forward_length", u32(c.ffn()));
  w.set(arch + ".attention.head_count", u32(c.num_attention_heads));
  w.set(arch + ".vocab_size", u32(c.vocab_size));
  if (arch == "gpt2") {
    w.set(arch + ".attention.layer_norm_epsilon", c.layernorm_epsilon);
    return;
  }
  w.set(arch + ".attention.head_count_kv", u32(c.query_groups()));
  w.set(arch + ".attention.layer_norm_rms_epsilon", c.layernorm_epsilon);
  w.set(arch + ".rope.freq_base", c.rotary_base);
  w.set(arch + ".rope.dimension_count", u32(c.rotary_dim()));
  if (c.kv_channels > 0) {  // heads not hidden / heads wide (Qwen3, Mistral-Nemo)
    w.set(arch + ".attention.key_length", u32(c.head_dim()));
    w.set(arch + ".attention.value_length", u32(c.head_dim()));
  }
  if (c.use_rope_scaling && c.rope_scaling_type == "linear") {
    w.set(arch + ".rope.scaling.type", std::string("linear"));
    w.set(arch + ".rope.scaling.factor", c.rope_scaling_factor);
  }
  if (c.window_size > 0)
    notes.push_back("--window-size " + std::to_string(c.window_size) + ": llama.cpp's " + arch +
                    " attends to the whole context (as it runs Mistral): the same outputs for "
                    "contexts up to the window");
}

// Llama 3.1's RoPE scaling as llama.cpp takes it: rope_freqs.weight, one divisor of each
// pair's frequency (the unscaled frequency over trident's scaled one).
std::vector<float> rope_frequency_factors(const ModelConfig& c) {
  const kernels::RopeConfig scaled = layer_dims(c, 0, 1).rope;
  kernels::RopeConfig plain = scaled;
  plain.scaling = {};
  std::vector<float> factors(scaled.rotary_dim / 2);
  for (int i = 0; i < (int)factors.size(); ++i)
    factors[i] = (float)(kernels::rope_inv_freq(plain, i) / kernels::rope_inv_freq(scaled, i));
  return factors;
}

// Tensors come from the gathered model by trident's name.
struct Model {
  const ModelConfig& c;
  const Parameters& whole;
  GgufWriter& w;
  std::vector<std::string>& notes;
  OutType type;

  bool has(const std::string& n) const { return whole.layout().contains(n); }
  const float* data(const std::string& n) const {
    return whole.values() + whole.layout().find(n).offset;
  }
  long cols(const std::string& n) const {
    const ParamSpec& s = whole.layout().find(n);
    return s.global_shape.size() == 2 ? s.global_shape[1] : 0;
  }
  // Rows [first, first + rows) of trident's tensor n as GGUF tensor `to`.
  void rows(const std::string& to, const std::string& n, long first, long count,
            long heads = 0) const {
    const long width = std::max(cols(n), 1L);
    add(w, notes, to, {data(n) + first * width, count, cols(n), heads, c.head_dim()}, type);
  }
  void all(const std::string& to, const std::string& n) const {
    rows(to, n, 0, whole.layout().find(n).global_shape[0]);
  }
  // The weight and, when the model has it, the bias.
  void linear(const std::string& to, const std::string& n, long first, long count,
              long heads = 0) const {
    rows(to + ".weight", n + ".weight", first, count, heads);
    if (has(n + ".bias")) rows(to + ".bias", n + ".bias", first, count, heads);
  }
};

void add_gpt2_layer(const Model& m, int l) {
  const std::string b = "blk." + std::to_string(l) + ".", t = "layers." + std::to_string(l) + ".";
  for (const char* kind : {".weight", ".bias"}) {
    m.all(b + "attn_norm" + kind, t + "input_layernorm" + kind);
    m.all(b + "attn_qkv" + kind, t + "self_attention.linear_qkv" + kind);
    m.all(b + "attn_output" + kind, t + "self_attention.linear_proj" + kind);
    m.all(b + "ffn_norm" + kind, t + "post_attention_layernorm" + kind);
    m.all(b + "ffn_up" + kind, t + "mlp.linear_fc1" + kind);
    m.all(b + "ffn_down" + kind, t + "mlp.linear_fc2" + kind);
  }
}

void add_llama_layer(const Model& m, int l, bool interleave) {
  const ModelConfig& c = m.c;
  const std::string b = "blk." + std::to_string(l) + ".", t = "layers." + std::to_string(l) + ".";
  const long q = c.attention_width(), kv = (long)c.query_groups() * c.head_dim();
  const long q_heads = interleave ? c.num_attention_heads : 0;
  const long kv_heads = interleave ? c.query_groups() : 0;
  m.all(b + "attn_norm.weight", t + "input_layernorm.weight");
  const std::string att = t + "self_attention.";
  if (m.has(att + "linear_q.weight")) {  // --group-query-attention: linear_q, [k; v]
    m.linear(b + "attn_q", att + "linear_q", 0, q, q_heads);
    m.linear(b + "attn_k", att + "linear_kv", 0, kv, kv_heads);
    m.linear(b + "attn_v", att + "linear_kv", kv, kv);
  } else {  // one [q; k; v]
    m.linear(b + "attn_q", att + "linear_qkv", 0, q, q_heads);
    m.linear(b + "attn_k", att + "linear_qkv", q, kv, kv_heads);
    m.linear(b + "attn_v", att + "linear_qkv", q + kv, kv);
  }
  if (c.qk_layernorm) {
    m.all(b + "attn_q_norm.weight", att + "q_layernorm.weight");
    m.all(b + "attn_k_norm.weight", att + "k_layernorm.weight");
  }
  m.linear(b + "attn_output", att + "linear_proj", 0, c.hidden_size);
  m.all(b + "ffn_norm.weight", t + "post_attention_layernorm.weight");
  m.linear(b + "ffn_gate", t + "mlp.linear_fc1", 0, c.ffn());
  m.linear(b + "ffn_up", t + "mlp.linear_fc1", c.ffn(), c.ffn());
  m.linear(b + "ffn_down", t + "mlp.linear_fc2", 0, c.hidden_size);
}

}  // namespace

std::vector<std::string> add_model(GgufWriter& w, const ModelConfig& c, const Parameters& whole,
                                   OutType type, const std::string& name) {
  const std::string arch = gguf_architecture(c);
  std::vector<std::string> notes;
  w.set("general.architecture", arch);
  w.set("general.name", name);
  w.set("general.file_type", file_type(type));
  w.set("general.quantization_version", (std::uint32_t)2);  // ggml's GGML_QNT_VERSION
  add_hyperparameters(w, c, arch, notes);
  const Model m{c, whole, w, notes, type};
  m.rows("token_embd.weight", "embedding.word_embeddings.weight", 0, c.vocab_size);
  if (arch == "gpt2") m.all("position_embd.weight", "embedding.position_embeddings.weight");
  for (int l = 0; l < c.num_layers; ++l) {
    if (arch == "gpt2")
      add_gpt2_layer(m, l);
    else
      add_llama_layer(m, l, arch == "llama");
  }
  m.all("output_norm.weight", "final_layernorm.weight");
  if (m.has("final_layernorm.bias")) m.all("output_norm.bias", "final_layernorm.bias");
  // Tied: no output.weight, and llama.cpp uses token_embd for the output layer.
  if (!c.tied_output()) m.rows("output.weight", "output_layer.weight", 0, c.vocab_size);
  if (c.use_rope_scaling && c.rope_scaling_type != "linear") {
    auto factors = std::make_shared<std::vector<float>>(rope_frequency_factors(c));
    w.add_tensor({"rope_freqs.weight", {(long)factors->size()}, GgmlType::kF32, [factors] {
                    return encode_tensor(factors->data(), (long)factors->size(), GgmlType::kF32);
                  }});
  }
  return notes;
}

}  // namespace trident::deploy
