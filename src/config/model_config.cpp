#include "config/model_config.h"

#include <cmath>
#include <stdexcept>

namespace trident {

namespace {
long padded_vocab(const ModelConfig& c, int t) {
  long multiple = (long)c.make_vocab_size_divisible_by * t;
  return (c.vocab_size + multiple - 1) / multiple * multiple;
}
}  // namespace

int ModelConfig::padded_vocab_size(int t) const {
  return (int)std::min(padded_vocab(*this, t), (long)INT_MAX);
}

namespace {
// The model's parameters by kind, in T: long for the exact count, double for sizes whose
// count would overflow a long (a refusal names them, train/memory_check.h).
template <class T>
ParameterShares<T> shares_of(const ModelConfig& c, int t) {
  const T h = c.hidden_size, f = c.ffn(), f1 = c.fc1_rows(), b = c.add_bias_linear() ? 1 : 0;
  const T norm = c.rms_norm() ? h : 2 * h;  // RMSNorm has no bias
  const T d = c.num_attention_heads > 0 ? c.head_dim() : 0, a = c.attention_width();
  const T qkv = a + 2 * (T)c.query_groups() * d, qkv_b = c.qkv_bias() ? 1 : 0;
  const T qk_norm = c.qk_layernorm ? 2 * d : 0;  // q's and k's, each head_dim wide
  ParameterShares<T> s;
  s.per_layer = 2 * norm + (qkv * h + qkv_b * qkv) + qk_norm + (a * h + b * h) + (f1 * h + b * f1) +
                (f * h + b * h);
  s.word_embedding = (T)c.padded_vocab_size(t) * h;
  s.positions = c.learned_positions() ? (T)c.max_positions() * h : 0;
  s.final_norm = norm;
  s.output = c.tied_output() ? 0 : s.word_embedding;
  return s;
}
}  // namespace

long ModelConfig::parameter_count(int t) const {
  const ParameterShares<long> s = shares_of<long>(*this, t);
  return s.word_embedding + s.positions + num_layers * s.per_layer + s.final_norm + s.output;
}

ParameterShares<double> ModelConfig::parameter_shares(int t) const {
  return shares_of<double>(*this, t);
}

namespace {
std::string num(long v) {
  return std::to_string(v);
}

// The options of the Llama family: each rule names its flag, as Megatron's checks do.
void validate_llama_options(const ModelConfig& c, int t, std::vector<std::string>& errors) {
  if (c.normalization != "LayerNorm" && c.normalization != "RMSNorm")
    errors.push_back("--normalization must be LayerNorm or RMSNorm (got '" + c.normalization +
                     "')");
  if (c.position_embedding_type != "learned_absolute" && c.position_embedding_type != "rope")
    errors.push_back("--position-embedding-type must be learned_absolute or rope (got '" +
                     c.position_embedding_type + "')");
  if (c.rope()) {
    if (!(c.rotary_base > 0.f && std::isfinite(c.rotary_base)))
      errors.push_back("--rotary-base must be > 0 and finite");
    if (!(c.rotary_percent > 0.f && c.rotary_percent <= 1.f))
      errors.push_back("--rotary-percent must be in (0, 1] (got " +
                       std::to_string(c.rotary_percent) + ")");
    else if (c.hidden_size > 0 && c.num_attention_heads > 0 &&
             (c.kv_channels > 0 || c.hidden_size % c.num_attention_heads == 0) &&
             (c.rotary_dim() < 2 || c.rotary_dim() % 2))
      errors.push_back("--position-embedding-type rope: head dim (" + num(c.head_dim()) +
                       ") x --rotary-percent must be an even number >= 2 (got " +
                       num(c.rotary_dim()) + ")");
  }
  if (!c.group_query_attention) return;
  const int g = c.num_query_groups, heads = c.num_attention_heads;
  if (g <= 0) {
    errors.push_back("--num-query-groups must be > 0 (got " + num(g) + ")");
    return;
  }
  if (heads > 0 && heads % g)
    errors.push_back("--num-attention-heads (" + num(heads) +
                     ") must be divisible by --num-query-groups (" + num(g) + ")");
  if (t > 0 && g % t && t % g)
    errors.push_back("--num-query-groups (" + num(g) + ") and --tensor-model-parallel-size (" +
                     num(t) +
                     ") must divide one another (groups split over ranks, or each group's "
                     "keys and values replicated on t / G ranks)");
}
}  // namespace

std::vector<std::string> validate_model_config(const ModelConfig& c, int t) {
  std::vector<std::string> errors;
  auto positive = [&](long value, const char* flag) {
    if (value <= 0)
      errors.push_back(std::string(flag) + " must be > 0 (got " + std::to_string(value) + ")");
  };
  positive(c.num_layers, "--num-layers");
  positive(c.hidden_size, "--hidden-size");
  positive(c.num_attention_heads, "--num-attention-heads");
  positive(c.seq_length, "--seq-length");
  positive(c.vocab_size, "--vocab-size");
  positive(c.make_vocab_size_divisible_by, "--make-vocab-size-divisible-by");
  if (c.ffn_hidden_size < 0) positive(c.ffn_hidden_size, "--ffn-hidden-size");
  if (c.max_position_embeddings < 0)
    positive(c.max_position_embeddings, "--max-position-embeddings");
  if (!(c.init_method_std > 0.f && std::isfinite(c.init_method_std)))
    errors.push_back("--init-method-std must be > 0 and finite");
  if (!(c.layernorm_epsilon > 0.f && std::isfinite(c.layernorm_epsilon)))
    errors.push_back("--norm-epsilon (--layernorm-epsilon) must be > 0 and finite");
  // Sizes whose products the model's shapes take must fit an int.
  if (c.ffn_hidden_size == 0 && c.hidden_size > INT_MAX / 4)
    errors.push_back("--hidden-size (" + std::to_string(c.hidden_size) +
                     ") is too large: the default --ffn-hidden-size, 4 x it, must fit an int");
  if (t > 0 && c.vocab_size > 0 && c.make_vocab_size_divisible_by > 0 &&
      padded_vocab(c, t) > INT_MAX)
    errors.push_back("--vocab-size (" + std::to_string(c.vocab_size) +
                     ") padded to a multiple of --make-vocab-size-divisible-by x "
                     "--tensor-model-parallel-size must fit an int");
  if (c.kv_channels == 0 && c.hidden_size > 0 && c.num_attention_heads > 0 &&
      c.hidden_size % c.num_attention_heads)
    errors.push_back("--hidden-size (" + std::to_string(c.hidden_size) +
                     ") must be divisible by --num-attention-heads (" +
                     std::to_string(c.num_attention_heads) + ")");
  if (t > 0 && c.num_attention_heads > 0 && c.num_attention_heads % t)
    errors.push_back("--num-attention-heads (" + std::to_string(c.num_attention_heads) +
                     ") must be divisible by --tensor-model-parallel-size (" + std::to_string(t) +
                     ")");
  if (t > 0 && c.ffn() > 0 && c.ffn() % t)
    errors.push_back("--ffn-hidden-size (" + std::to_string(c.ffn()) +
                     ") must be divisible by --tensor-model-parallel-size (" + std::to_string(t) +
                     ")");
  if (c.seq_length > 0 && c.max_position_embeddings > 0 && c.seq_length > c.max_position_embeddings)
    errors.push_back("--seq-length (" + std::to_string(c.seq_length) +
                     ") must be <= --max-position-embeddings (" +
                     std::to_string(c.max_position_embeddings) + ")");
  validate_llama_options(c, t, errors);
  validate_qwen_options(c, errors);
  validate_rope_scaling_and_window(c, errors);
  validate_moe_config(c, t, errors);
  return errors;
}

void validate_qwen_options(const ModelConfig& c, std::vector<std::string>& errors) {
  if (c.kv_channels < 0)
    errors.push_back("--kv-channels must be > 0 (got " + num(c.kv_channels) +
                     "; 0: hidden / heads)");
  if (c.kv_channels > 0 && c.num_attention_heads > 0 && 3L * c.attention_width() > INT_MAX)
    errors.push_back("--kv-channels x --num-attention-heads x 3 must fit an int");
  if (c.qk_layernorm && !c.rms_norm())
    errors.push_back(
        "--qk-layernorm normalises q and k with RMSNorm: it needs --normalization "
        "RMSNorm");
}

void validate_rope_scaling_and_window(const ModelConfig& c, std::vector<std::string>& errors) {
  if (c.window_size < 0)
    errors.push_back("--window-size must be >= 0 (got " + num(c.window_size) + "; 0: no window)");
  if (!c.use_rope_scaling) return;
  if (!c.rope()) errors.push_back("--use-rope-scaling needs --position-embedding-type rope");
  if (c.rope_scaling_type != "llama3" && c.rope_scaling_type != "linear")
    errors.push_back("rope scaling type '" + c.rope_scaling_type +
                     "' is not implemented (llama3 or linear)");
  if (!(c.rope_scaling_factor > 0.f && std::isfinite(c.rope_scaling_factor)))
    errors.push_back("--rope-scaling-factor must be > 0 and finite");
  if (c.rope_scaling_type != "llama3") return;
  // HF divides by high - low and by each factor: both positive, high above low.
  if (!(c.rope_low_freq_factor > 0.f && c.rope_high_freq_factor > c.rope_low_freq_factor &&
        std::isfinite(c.rope_high_freq_factor)))
    errors.push_back("rope scaling: low_freq_factor must be > 0 and high_freq_factor above it");
  if (c.rope_original_max_positions <= 0)
    errors.push_back("rope scaling: original_max_position_embeddings must be > 0");
}

namespace {
// The Qwen family's published shapes, from the config.json of each model on the HF hub:
//   Qwen/Qwen2.5-0.5B: Qwen2ForCausalLM, 24 layers, hidden 896, 14 heads, 2 key/value heads,
//     intermediate 4864, vocab 151936, max_position_embeddings 32768, rope_theta 1e6,
//     rms_norm_eps 1e-6, tie_word_embeddings true, q/k/v biases (use_sliding_window false).
//   Qwen/Qwen3-0.6B: Qwen3ForCausalLM, 28 layers, hidden 1024, 16 heads, 8 key/value heads,
//     head_dim 128, intermediate 3072, vocab 151936, max_position_embeddings 40960,
//     rope_theta 1e6, rms_norm_eps 1e-6, tie_word_embeddings true, attention_bias false,
//     q_norm / k_norm.
bool qwen_preset(const std::string& name, ModelConfig& c) {
  if (name != "qwen2.5-0.5b" && name != "qwen3-0.6b") return false;
  const bool qwen3 = name == "qwen3-0.6b";
  c.normalization = "RMSNorm", c.position_embedding_type = "rope", c.swiglu = true;
  c.group_query_attention = true, c.disable_bias_linear = true;
  c.rotary_base = 1e6f, c.layernorm_epsilon = 1e-6f, c.vocab_size = 151936;
  c.num_layers = qwen3 ? 28 : 24, c.hidden_size = qwen3 ? 1024 : 896;
  c.num_attention_heads = qwen3 ? 16 : 14, c.num_query_groups = qwen3 ? 8 : 2;
  c.ffn_hidden_size = qwen3 ? 3072 : 4864;
  c.max_position_embeddings = qwen3 ? 40960 : 32768;
  c.add_qkv_bias = !qwen3;
  c.qk_layernorm = qwen3, c.kv_channels = qwen3 ? 128 : 0;
  return true;
}

// Today's open models, as their HF config.json publish them (seq_length is ours: a length a
// CPU run can train; the published context stays max_position_embeddings).
bool open_model_preset(const std::string& name, ModelConfig& c) {
  auto llama = [&](int layers, int hidden, int heads, int groups, int ffn, int vocab, int positions,
                   float theta) {
    c.num_layers = layers, c.hidden_size = hidden, c.num_attention_heads = heads;
    c.group_query_attention = true, c.num_query_groups = groups, c.ffn_hidden_size = ffn;
    c.vocab_size = vocab, c.max_position_embeddings = positions, c.rotary_base = theta;
    c.normalization = "RMSNorm", c.position_embedding_type = "rope", c.swiglu = true;
    c.disable_bias_linear = true, c.untie_embeddings_and_output_weights = true;
    c.layernorm_epsilon = 1e-5f, c.seq_length = 2048;
  };
  auto llama3_scaling = [&](float factor) {
    c.use_rope_scaling = true, c.rope_scaling_type = "llama3", c.rope_scaling_factor = factor;
    c.rope_low_freq_factor = 1.f, c.rope_high_freq_factor = 4.f;
    c.rope_original_max_positions = 8192;
  };
  if (name == "llama3.2-1b") {  // huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json
    llama(16, 2048, 32, 8, 8192, 128256, 131072, 500000.f);
    llama3_scaling(32.f);
    c.untie_embeddings_and_output_weights = false;  // tie_word_embeddings: true
  } else if (name == "llama3.1-8b") {               // meta-llama/Llama-3.1-8B/blob/main/config.json
    llama(32, 4096, 32, 8, 14336, 128256, 131072, 500000.f);
    llama3_scaling(8.f);
  } else if (name == "mistral-7b") {  // mistralai/Mistral-7B-v0.1/blob/main/config.json
    llama(32, 4096, 32, 8, 14336, 32000, 32768, 10000.f);
    c.window_size = 4096;  // "sliding_window": 4096
  } else {
    return false;
  }
  return true;
}
}  // namespace

ModelConfig preset_model(const std::string& name) {
  ModelConfig c;
  c.vocab_size = 50257;
  c.seq_length = 256;
  if (name == "gpt2-small") {
    c.num_layers = 12, c.hidden_size = 768, c.num_attention_heads = 12;
  } else if (name == "gpt-tiny") {
    c.num_layers = 6, c.hidden_size = 384, c.num_attention_heads = 6;
  } else if (!qwen_preset(name, c) && !open_model_preset(name, c)) {
    throw std::invalid_argument("unknown model preset '" + name +
                                "' (known: gpt2-small, gpt-tiny, llama3.2-1b, llama3.1-8b, "
                                "mistral-7b, qwen2.5-0.5b, qwen3-0.6b)");
  }
  return c;
}

}  // namespace trident
