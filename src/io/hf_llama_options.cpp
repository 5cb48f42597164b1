#include "io/hf_llama_options.h"

#include <cfloat>
#include <climits>
#include <stdexcept>

namespace trident::io {

namespace {

using json = nlohmann::json;

// rope_scaling[key] as a positive float; a problem naming it otherwise.
float scaling_number(const json& r, const char* key, std::vector<std::string>& problems) {
  if (!r.contains(key) || !r[key].is_number() || !(r[key].get<double>() > 0) ||
      r[key].get<double>() > FLT_MAX) {
    problems.push_back(std::string("\"rope_scaling\" needs \"") + key +
                       "\", a positive number (got " + (r.contains(key) ? r[key].dump() : "none") +
                       ")");
    return 1.f;
  }
  return r[key].get<float>();
}

bool has_string(const json& j, const char* key, const char* value) {
  return j.contains(key) && j[key].is_string() && j[key] == value;
}

// Whether every layer, none, or some are windowed (layer_types, or Qwen2's
// max_window_layers: layers from that index on use the window).
enum class Windowed { kAll, kNone, kSome };
Windowed windowed_layers(const json& j, std::vector<std::string>& problems) {
  if (j.contains("layer_types") && j["layer_types"].is_array()) {
    size_t sliding = 0;
    for (const json& t : j["layer_types"]) sliding += t == "sliding_attention";
    if (sliding == 0) return Windowed::kNone;
    return sliding == j["layer_types"].size() ? Windowed::kAll : Windowed::kSome;
  }
  if (!j.contains("use_sliding_window")) return Windowed::kAll;  // Mistral
  if (!j["use_sliding_window"].is_boolean()) {
    problems.push_back("\"use_sliding_window\" must be true or false");
    return Windowed::kNone;
  }
  if (!j["use_sliding_window"].get<bool>()) return Windowed::kNone;
  const long first = j.value("max_window_layers", 0L), layers = j.value("num_hidden_layers", 0L);
  if (first <= 0) return Windowed::kAll;
  return first >= layers ? Windowed::kNone : Windowed::kSome;
}

}  // namespace

bool is_mistral_config(const json& j) {
  if (has_string(j, "model_type", "mistral")) return true;
  if (j.contains("architectures") && j["architectures"].is_array())
    for (const json& a : j["architectures"])
      if (a == "MistralForCausalLM") return true;
  return false;
}

void parse_rope_scaling(const json& j, ModelConfig& c, std::vector<std::string>& problems) {
  if (!j.contains("rope_scaling") || j["rope_scaling"].is_null()) return;
  const json& r = j["rope_scaling"];
  // HF names the type "rope_type" (older files: "type").
  const char* key = r.is_object() && r.contains("rope_type") ? "rope_type" : "type";
  if (!r.is_object() || !r.contains(key) || !r[key].is_string()) {
    problems.push_back("\"rope_scaling\" is " + r.dump() +
                       ": it must be an object naming its \"rope_type\"");
    return;
  }
  const std::string type = r[key];
  if (type == "default") return;
  if (type != "llama3" && type != "linear") {
    problems.push_back("\"rope_scaling\" type \"" + type +
                       "\" is not implemented (trident computes llama3 and linear)");
    return;
  }
  c.use_rope_scaling = true, c.rope_scaling_type = type;
  c.rope_scaling_factor = scaling_number(r, "factor", problems);
  if (type == "linear") return;
  c.rope_low_freq_factor = scaling_number(r, "low_freq_factor", problems);
  c.rope_high_freq_factor = scaling_number(r, "high_freq_factor", problems);
  const json& original = r.value("original_max_position_embeddings", json());
  if (!original.is_number_integer() || original.get<long>() <= 0 || original.get<long>() > INT_MAX)
    problems.push_back(
        "\"rope_scaling\" needs \"original_max_position_embeddings\", a positive integer");
  else
    c.rope_original_max_positions = original.get<int>();
  if (!(c.rope_high_freq_factor > c.rope_low_freq_factor))
    problems.push_back("\"rope_scaling\": high_freq_factor must be above low_freq_factor");
}

void parse_sliding_window(const json& j, ModelConfig& c, std::vector<std::string>& problems) {
  if (!j.contains("sliding_window") || j["sliding_window"].is_null()) return;
  const json& w = j["sliding_window"];
  const Windowed layers = windowed_layers(j, problems);
  if (layers == Windowed::kNone) return;  // Qwen2's use_sliding_window: false
  if (!is_mistral_config(j) && !j.contains("use_sliding_window") && !j.contains("layer_types")) {
    problems.push_back("\"sliding_window\" is " + w.dump() +
                       ": HF's LlamaForCausalLM has no sliding window (MistralForCausalLM does)");
    return;
  }
  if (layers == Windowed::kSome) {
    problems.push_back(
        "\"sliding_window\" on some layers only (layer_types / max_window_layers): "
        "trident windows every layer or none");
    return;
  }
  if (!w.is_number_integer() || w.get<long>() <= 0 || w.get<long>() > INT_MAX) {
    problems.push_back("\"sliding_window\" must be a positive integer (got " + w.dump() + ")");
    return;
  }
  c.window_size = w.get<int>();
}

nlohmann::ordered_json rope_scaling_json(const ModelConfig& c) {
  if (!c.use_rope_scaling) return nullptr;
  if (c.rope_scaling_type == "linear")
    return {{"factor", c.rope_scaling_factor}, {"rope_type", "linear"}};
  return {{"factor", c.rope_scaling_factor},
          {"high_freq_factor", c.rope_high_freq_factor},
          {"low_freq_factor", c.rope_low_freq_factor},
          {"original_max_position_embeddings", c.rope_original_max_positions},
          {"rope_type", c.rope_scaling_type}};
}

void as_mistral(const ModelConfig& c, nlohmann::ordered_json& cfg) {
  if (c.add_bias_linear())
    throw std::invalid_argument(
        "a model with --window-size is written as HF's MistralForCausalLM, which has no "
        "biases: train it with --disable-bias-linear");
  cfg["architectures"] = {"MistralForCausalLM"};
  cfg["model_type"] = "mistral";
  cfg.erase("attention_bias");
  cfg.erase("mlp_bias");
  cfg["sliding_window"] = c.window_size;
}

}  // namespace trident::io
