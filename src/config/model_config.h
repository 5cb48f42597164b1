#pragma once
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "config/lora_config.h"
#include "config/moe_config.h"

namespace trident {

// The GPT-2 architecture's shape. Field names follow Megatron's flags.
// A model's parameters by kind (whole tensors, before tensor-parallel sharding).
template <class T>
struct ParameterShares {
  T word_embedding = 0;  // padded vocabulary x hidden
  T positions = 0;       // learned position embeddings (0 with RoPE)
  T per_layer = 0;       // one transformer layer
  T final_norm = 0;
  T output = 0;  // an untied output layer (0 when tied to the word embedding)
};

struct ModelConfig {
  int num_layers = 2;
  int hidden_size = 128;
  int num_attention_heads = 4;
  int ffn_hidden_size = 0;  // 0: 4 * hidden_size
  int seq_length = 128;
  int max_position_embeddings = 0;  // 0: seq_length
  int vocab_size = 50257;           // the tokenizer's vocabulary, before padding
  int make_vocab_size_divisible_by = 128;
  float init_method_std = 0.02f;
  float layernorm_epsilon = 1e-5f;  // --norm-epsilon (alias --layernorm-epsilon)

  // The Llama family's options (Megatron's flags); the defaults are GPT-2's block.
  std::string normalization = "LayerNorm";                   // or RMSNorm
  std::string position_embedding_type = "learned_absolute";  // or rope
  float rotary_base = 10000.f;
  float rotary_percent = 1.f;  // the fraction of each head's dims that RoPE rotates
  bool swiglu = false;         // fc1 is [gate | up], 2 x ffn rows
  bool group_query_attention = false;
  int num_query_groups = 1;  // with group_query_attention
  bool untie_embeddings_and_output_weights = false;
  bool disable_bias_linear = false;

  // The Qwen family's options (Megatron's flags). Qwen2: biases on q, k and v even under
  // --disable-bias-linear (--add-qkv-bias). Qwen3: per-head RMSNorm of q and k before RoPE,
  // its weight of head_dim shared by the heads (--qk-layernorm), and heads wider or narrower
  // than hidden / heads (--kv-channels; 0: hidden / heads).
  bool add_qkv_bias = false;
  bool qk_layernorm = false;
  int kv_channels = 0;
  // Llama 3.x RoPE scaling and Mistral's sliding window (Megatron's --use-rope-scaling,
  // --rope-scaling-factor, --window-size; HF's rope_scaling and sliding_window).
  bool use_rope_scaling = false;
  std::string rope_scaling_type = "llama3";  // llama3 (Llama 3.1's) or linear (positions / factor)
  float rope_scaling_factor = 8.f;
  float rope_low_freq_factor = 1.f;        // llama3 only
  float rope_high_freq_factor = 4.f;       // llama3 only
  int rope_original_max_positions = 8192;  // llama3 only: the context trained before scaling
  int window_size = 0;                     // a token attends to the last W keys; 0: all
  MoeConfig moe;                           // mixture of experts (none by default)
  LoraConfig lora;                         // low-rank adapters on a frozen base (none by default)

  // 4h unless given; saturates at INT_MAX, beyond which validation refuses the hidden size.
  int ffn() const {
    return ffn_hidden_size > 0 ? ffn_hidden_size : (int)std::min(4L * hidden_size, (long)INT_MAX);
  }
  int max_positions() const {
    return max_position_embeddings > 0 ? max_position_embeddings : seq_length;
  }
  int head_dim() const { return kv_channels > 0 ? kv_channels : hidden_size / num_attention_heads; }
  // Width of the query projection and of the attention output: heads x head_dim (h unless
  // --kv-channels says otherwise).
  long attention_width() const { return (long)num_attention_heads * head_dim(); }
  bool rms_norm() const { return normalization == "RMSNorm"; }
  bool rope() const { return position_embedding_type == "rope"; }
  bool learned_positions() const { return !rope(); }
  bool add_bias_linear() const { return !disable_bias_linear; }
  // Biases on the q, k, v projections: every linear's, or Qwen2's on those only.
  bool qkv_bias() const { return add_bias_linear() || add_qkv_bias; }
  bool tied_output() const { return !untie_embeddings_and_output_weights; }
  // Key/value heads: G with grouped-query attention, else one per query head.
  int query_groups() const {
    return group_query_attention ? num_query_groups : num_attention_heads;
  }
  // Dimensions of each head that RoPE rotates (even).
  int rotary_dim() const { return (int)(head_dim() * rotary_percent); }
  // Layer l (0-based, over the whole model) replaces its MLP with experts.
  bool is_moe_layer(int l) const {
    return moe.enabled() && (moe.layer_pattern.empty() || moe.layer_pattern[l]);
  }
  // Each expert's width: --moe-ffn-hidden-size, or the dense MLP's (Megatron's default).
  int moe_ffn() const { return moe.ffn_hidden_size > 0 ? moe.ffn_hidden_size : ffn(); }
  // Rows of fc1: [gate | up] with SwiGLU.
  int fc1_rows() const { return swiglu ? 2 * ffn() : ffn(); }
  // Grouped-query attention: rows of linear_kv on a rank of t ([k | v] of its G / t groups,
  // or of all G when t > G and they are replicated).
  int kv_rows_local(int t) const {
    const int g = query_groups();
    return 2 * (g % t == 0 ? g / t : g) * head_dim();
  }
  // Per token, what a rank's q, k, v projections write: linear_qkv's 3h / t, or linear_q's
  // h / t and linear_kv's rows.
  long qkv_projection_local(int t) const {
    return group_query_attention ? attention_width() / t + kv_rows_local(t)
                                 : 3L * attention_width() / t;
  }
  // Keys per query that attention FLOPs count over a sequence of `seq`: seq without a window
  // (Megatron's convention counts the whole square), scaled down by the fraction of the
  // causal (query, key) pairs a sliding window keeps: W (W + 1) / 2 + (seq - W) W of
  // seq (seq + 1) / 2.
  double attention_keys(double seq) const {
    const double w = window_size;
    if (window_size <= 0 || w >= seq) return seq;
    return seq * (w * (w + 1) / 2 + (seq - w) * w) / (seq * (seq + 1) / 2);
  }
  // Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by * t.
  int padded_vocab_size(int tensor_parallel_size) const;
  // Parameters of the model (padded vocabulary, tied output layer).
  long parameter_count(int tensor_parallel_size) const;
  // The same by kind, in double: no overflow for any size the flags allow.
  ParameterShares<double> parameter_shares(int tensor_parallel_size) const;
};

// Every rule the RoPE scaling and sliding-window options break (part of validate_model_config).
void validate_rope_scaling_and_window(const ModelConfig& c, std::vector<std::string>& errors);

// Every rule the model shape breaks, each as one line naming the flag and the rule.
std::vector<std::string> validate_model_config(const ModelConfig& c, int tensor_parallel_size);
// The mixture-of-experts shape's rules (config/moe_config.cpp), each naming its flag; t is
// also the experts' tensor-parallel size.
void validate_moe_config(const ModelConfig& c, int tensor_parallel_size,
                         std::vector<std::string>& errors);
// The Qwen options' rules (--kv-channels, --qk-layernorm), each naming its flag.
void validate_qwen_options(const ModelConfig& c, std::vector<std::string>& errors);

// Named configurations used by the benchmarks and the README.
ModelConfig preset_model(const std::string& name);

}  // namespace trident
