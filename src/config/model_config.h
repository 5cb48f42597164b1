#pragma once
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

namespace trident {

// The GPT-2 architecture's shape. Field names follow Megatron's flags.
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
  float layernorm_epsilon = 1e-5f;

  // 4h unless given; saturates at INT_MAX, beyond which validation refuses the hidden size.
  int ffn() const {
    return ffn_hidden_size > 0 ? ffn_hidden_size : (int)std::min(4L * hidden_size, (long)INT_MAX);
  }
  int max_positions() const {
    return max_position_embeddings > 0 ? max_position_embeddings : seq_length;
  }
  int head_dim() const { return hidden_size / num_attention_heads; }
  // Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by * t.
  int padded_vocab_size(int tensor_parallel_size) const;
  // Parameters of the model (padded vocabulary, tied output layer).
  long parameter_count(int tensor_parallel_size) const;
};

// Every rule the model shape breaks, each as one line naming the flag and the rule.
std::vector<std::string> validate_model_config(const ModelConfig& c, int tensor_parallel_size);

// Named configurations used by the benchmarks and the README.
ModelConfig preset_model(const std::string& name);

}  // namespace trident
