#include "io/hf_qwen.h"

#include "io/hf_llama.h"

namespace trident::io {

bool config_names(const nlohmann::json& j, const char* model_type, const char* architecture) {
  if (j.contains("model_type") && j["model_type"] == model_type) return true;
  if (j.contains("architectures") && j["architectures"].is_array())
    for (const auto& a : j["architectures"])
      if (a == architecture) return true;
  return false;
}

namespace {

bool is_qwen3_config(const nlohmann::json& j) {
  return config_names(j, "qwen3", "Qwen3ForCausalLM");
}

// Qwen2's sliding window applies only with use_sliding_window true; transformers' newer
// files say the same per layer in layer_types. Both are taken out of `j` once checked.
void take_sliding_window(nlohmann::json& j, std::vector<std::string>& problems) {
  if (j.contains("use_sliding_window")) {
    if (!j["use_sliding_window"].is_boolean())
      problems.push_back("\"use_sliding_window\" must be true or false");
    else if (j["use_sliding_window"].get<bool>())
      problems.push_back("\"use_sliding_window\" is true (window " +
                         j.value("sliding_window", nlohmann::json()).dump() +
                         "): trident's Qwen attention is full causal attention");
  } else if (j.contains("sliding_window") && !j["sliding_window"].is_null()) {
    problems.push_back("\"sliding_window\" is " + j["sliding_window"].dump() +
                       " without \"use_sliding_window\": false; trident's Qwen attention is "
                       "full causal attention");
  }
  if (j.contains("layer_types")) {
    const nlohmann::json& types = j["layer_types"];
    bool full = types.is_array();
    for (size_t i = 0; full && i < types.size(); ++i) full = types[i] == "full_attention";
    if (!full)
      problems.push_back("\"layer_types\" is " + types.dump() +
                         ": trident's Qwen layers are all full_attention");
  }
  for (const char* key :
       {"use_sliding_window", "sliding_window", "max_window_layers", "layer_types"})
    j.erase(key);
}

}  // namespace

bool is_qwen_config(const nlohmann::json& j) {
  return config_names(j, "qwen2", "Qwen2ForCausalLM") || is_qwen3_config(j);
}

ModelConfig parse_qwen_config(const nlohmann::json& j, std::vector<std::string>& problems) {
  const bool qwen3 = is_qwen3_config(j);
  nlohmann::json rest = j;  // what the Llama reader checks: Qwen's own keys taken out
  take_sliding_window(rest, problems);
  if (qwen3 && rest.contains("attention_bias") && rest["attention_bias"] != false)
    problems.push_back("\"attention_bias\" is " + rest["attention_bias"].dump() +
                       ": trident's Qwen3 has no biases (Qwen3 would add them to o_proj too)");
  if (!qwen3 && rest.contains("attention_bias"))
    problems.push_back("\"attention_bias\" is not a Qwen2 key (Qwen2 always has q, k, v biases)");
  if (rest.contains("mlp_bias") && rest["mlp_bias"] != false)
    problems.push_back("\"mlp_bias\" is " + rest["mlp_bias"].dump() + ": Qwen's MLP has no biases");
  rest["attention_bias"] = false, rest["mlp_bias"] = false;
  ModelConfig c = parse_llama_config(rest, problems);
  c.add_qkv_bias = !qwen3;
  c.qk_layernorm = qwen3;
  // The Llama reader took config.json's head_dim; without one, h / heads (a bad head count
  // is already among the problems, and must not be divided by).
  if (qwen3 && (c.kv_channels > 0 || c.num_attention_heads > 0)) c.kv_channels = c.head_dim();
  return c;
}

bool is_qwen_model(const ModelConfig& c) {
  return c.add_qkv_bias || c.qk_layernorm;  // a Llama or Mistral may have --kv-channels too
}

nlohmann::ordered_json qwen_config_json(const ModelConfig& c) {
  const bool qwen2 = c.add_qkv_bias && !c.qk_layernorm;
  const bool qwen3 = c.qk_layernorm && !c.add_qkv_bias;
  if (!is_llama_model(c) || !c.disable_bias_linear || !(qwen2 || qwen3))
    throw std::invalid_argument(
        "HuggingFace export writes Qwen2 (--add-qkv-bias --disable-bias-linear) or Qwen3 "
        "(--qk-layernorm --disable-bias-linear), any --kv-channels, on the Llama block (RMSNorm, "
        "rope with --rotary-percent 1, SwiGLU, --group-query-attention); this model's options "
        "match neither");
  nlohmann::ordered_json cfg = {
      {"architectures", {qwen3 ? "Qwen3ForCausalLM" : "Qwen2ForCausalLM"}},
      {"model_type", qwen3 ? "qwen3" : "qwen2"},
      {"hidden_act", "silu"},
      {"num_hidden_layers", c.num_layers},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.ffn()},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.query_groups()},
      {"head_dim", c.head_dim()}};
  if (qwen3) cfg["attention_bias"] = false;
  cfg.update(nlohmann::ordered_json{{"max_position_embeddings", c.max_positions()},
                                    {"vocab_size", c.vocab_size},
                                    {"rms_norm_eps", c.layernorm_epsilon},
                                    {"rope_theta", c.rotary_base},
                                    {"rope_scaling", nullptr},
                                    {"use_sliding_window", false},
                                    {"sliding_window", nullptr},
                                    {"max_window_layers", c.num_layers},
                                    {"tie_word_embeddings", c.tied_output()},
                                    {"torch_dtype", "float32"}});
  return cfg;
}

}  // namespace trident::io
