#include "io/hf_moe.h"

#include <climits>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "io/hf_llama.h"
#include "io/hf_qwen.h"

namespace trident::io {

namespace {

using json = nlohmann::json;

// j[key] as a positive int; `fallback` when absent (a problem when fallback < 0).
int positive_int(const json& j, const char* key, int fallback, std::vector<std::string>& problems) {
  if (!j.contains(key) || j[key].is_null()) {
    if (fallback < 0) problems.push_back(std::string("missing key \"") + key + "\"");
    return fallback < 0 ? 0 : fallback;
  }
  const json& v = j[key];
  if (!v.is_number_integer() || v.get<long>() <= 0 || v.get<long>() > INT_MAX) {
    problems.push_back(std::string("\"") + key + "\" is " + v.dump() +
                       ": must be a positive integer");
    return 0;
  }
  return v.get<int>();
}

// Qwen3-MoE's layer rule (Qwen3MoeDecoderLayer): layer i is MoE iff it is not in
// mlp_only_layers and (i + 1) % decoder_sparse_step == 0; as trident's explicit pattern
// (empty: every layer, Megatron's --moe-layer-freq 1).
std::vector<bool> qwen3_moe_pattern(const json& j, int layers, std::vector<std::string>& problems) {
  const int step = positive_int(j, "decoder_sparse_step", 1, problems);
  std::set<long> dense;
  const json only = j.value("mlp_only_layers", json::array());
  if (!only.is_array()) problems.push_back("\"mlp_only_layers\" must be a list of layer indices");
  for (const json& l : only.is_array() ? only : json::array()) {
    if (!l.is_number_integer() || l.get<long>() < 0 || l.get<long>() >= layers)
      problems.push_back("\"mlp_only_layers\" holds " + l.dump() +
                         ": each must be a layer index in [0, " + std::to_string(layers) + ")");
    else
      dense.insert(l.get<long>());
  }
  if (step <= 0 || layers <= 0) return {};
  std::vector<bool> pattern(layers);
  bool all = true, any = false;
  for (int i = 0; i < layers; ++i) {
    pattern[i] = !dense.count(i) && (i + 1) % step == 0;
    all = all && pattern[i], any = any || pattern[i];
  }
  if (!any)
    problems.push_back("\"mlp_only_layers\" and \"decoder_sparse_step\" (" + std::to_string(step) +
                       ") leave no MoE layer: this is a dense model, which trident loads as "
                       "Qwen3ForCausalLM");
  return all ? std::vector<bool>{} : pattern;
}

// The experts, the router's k and convention, the experts' width and which layers are MoE.
MoeConfig parse_moe_shape(const json& j, bool mixtral, const ModelConfig& c,
                          std::vector<std::string>& problems) {
  MoeConfig m;
  m.num_experts = positive_int(j, mixtral ? "num_local_experts" : "num_experts", -1, problems);
  m.router_topk = positive_int(j, "num_experts_per_tok", mixtral ? 2 : 8, problems);
  if (m.num_experts > 0 && m.router_topk > m.num_experts)
    problems.push_back("\"num_experts_per_tok\" (" + std::to_string(m.router_topk) +
                       ") exceeds the number of experts (" + std::to_string(m.num_experts) + ")");
  if (mixtral) {  // every layer MoE, experts as wide as intermediate_size, renormalised top-k
    m.ffn_hidden_size = c.ffn_hidden_size;
    return m;
  }
  m.ffn_hidden_size = positive_int(j, "moe_intermediate_size", -1, problems);
  bool norm_topk_prob = false;  // HF's default: the top-k softmax weights as they are
  if (j.contains("norm_topk_prob") && !j["norm_topk_prob"].is_boolean())
    problems.push_back("\"norm_topk_prob\" must be true or false");
  else if (j.contains("norm_topk_prob"))
    norm_topk_prob = j["norm_topk_prob"].get<bool>();
  m.router_pre_softmax = !norm_topk_prob;
  m.layer_pattern = qwen3_moe_pattern(j, c.num_layers, problems);
  return m;
}

}  // namespace

bool is_mixtral_config(const json& j) {
  return config_names(j, "mixtral", "MixtralForCausalLM");
}

bool is_moe_config(const json& j) {
  return is_mixtral_config(j) || config_names(j, "qwen3_moe", "Qwen3MoeForCausalLM");
}

ModelConfig parse_moe_config(const json& j, std::vector<std::string>& problems) {
  const bool mixtral = is_mixtral_config(j);
  // The attention and the rest of the block are Mistral's (Mixtral) or Qwen3's: their readers
  // check them, the MoE keys being none of theirs.
  json rest = j;
  rest["model_type"] = mixtral ? "mistral" : "qwen3";
  rest["architectures"] = {mixtral ? "MistralForCausalLM" : "Qwen3ForCausalLM"};
  ModelConfig c = mixtral ? parse_llama_config(rest, problems) : parse_qwen_config(rest, problems);
  if (mixtral && j.contains("router_jitter_noise") &&
      (!j["router_jitter_noise"].is_number() || j["router_jitter_noise"].get<double>() < 0))
    problems.push_back("\"router_jitter_noise\" must be a number >= 0");
  c.moe = parse_moe_shape(j, mixtral, c, problems);
  return c;
}

bool is_qwen3_moe_model(const ModelConfig& c) {
  return c.moe.enabled() && c.qk_layernorm;
}

std::vector<std::string> moe_hf_modules(const std::string& module, bool qwen3_moe) {
  const std::string block = qwen3_moe ? "mlp." : "block_sparse_moe.";
  if (module == "mlp.router") return {block + "gate"};
  const std::string experts = "mlp.experts.";
  if (module.rfind(experts, 0) != 0) return {};
  const size_t dot = module.find('.', experts.size());
  if (dot == std::string::npos) return {};
  const std::string pre = block + module.substr(4, dot + 1 - 4);  // "experts.E."
  const std::string leaf = module.substr(dot + 1);
  if (leaf == "linear_fc1")
    return qwen3_moe ? std::vector<std::string>{pre + "gate_proj", pre + "up_proj"}
                     : std::vector<std::string>{pre + "w1", pre + "w3"};
  if (leaf == "linear_fc2") return {pre + (qwen3_moe ? "down_proj" : "w2")};
  return {};
}

FusedExpert v5_fused_expert(const std::string& name) {
  // layers.L.mlp.experts.E.linear_fc1.weight
  const std::string experts = ".mlp.experts.";
  const size_t at = name.find(experts);
  if (name.rfind("layers.", 0) != 0 || at == std::string::npos) return {};
  const size_t dot = name.find('.', at + experts.size());
  if (dot == std::string::npos) return {};
  const std::string leaf = name.substr(dot + 1);
  if (leaf != "linear_fc1.weight" && leaf != "linear_fc2.weight") return {};
  const std::string layer = name.substr(7, at - 7);
  const int expert = std::stoi(name.substr(at + experts.size(), dot - at - experts.size()));
  return {"model.layers." + layer + ".mlp.experts." +
              (leaf == "linear_fc1.weight" ? "gate_up_proj" : "down_proj"),
          expert};
}

std::string v5_renamed(const std::string& hf_name) {
  const std::string from = ".block_sparse_moe.gate.weight";
  if (!hf_name.ends_with(from)) return "";
  return hf_name.substr(0, hf_name.size() - from.size()) + ".mlp.gate.weight";
}

std::vector<std::string> v5_moe_tensors(int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".mlp.";
  return {p + "experts.gate_up_proj", p + "experts.down_proj", p + "gate.weight"};
}

std::vector<std::string> moe_export_problems(const ModelConfig& c) {
  const MoeConfig& m = c.moe;
  const bool qwen3_moe = is_qwen3_moe_model(c);
  std::vector<std::string> why;
  if (!is_llama_model(c))
    why.push_back(
        "the block: Mixtral's and Qwen3-MoE's are Llama's (RMSNorm, rope with "
        "--rotary-percent 1, SwiGLU, --group-query-attention)");
  if (m.shared_expert_intermediate_size > 0)
    why.push_back(
        "--moe-shared-expert-intermediate-size: neither Mixtral nor Qwen3-MoE has "
        "shared experts");
  if (!m.dropless()) why.push_back("--moe-expert-capacity-factor: HF's MoE layers are dropless");
  if (m.router_topk_scaling_factor != 0.f)
    why.push_back("--moe-router-topk-scaling-factor: HF's routers do not scale the weights");
  if (m.router_score_function != "softmax")
    why.push_back("--moe-router-score-function " + m.router_score_function +
                  ": HF's routers use softmax");
  if (qwen3_moe) return why;
  std::string dense;
  for (int l = 0; l < c.num_layers; ++l)
    if (!c.is_moe_layer(l)) dense += (dense.empty() ? "" : ", ") + std::to_string(l);
  if (!dense.empty())
    why.push_back("--moe-layer-freq makes layers " + dense +
                  " dense: MixtralForCausalLM makes every layer MoE (Qwen3-MoE's "
                  "mlp_only_layers can say it, with Qwen3's --qk-layernorm)");
  if (m.router_pre_softmax)
    why.push_back(
        "--moe-router-pre-softmax: MixtralForCausalLM renormalises the top-k weights "
        "(Qwen3-MoE's norm_topk_prob false does not, with Qwen3's --qk-layernorm)");
  if (c.add_bias_linear() || c.add_qkv_bias)
    why.push_back("biases: MixtralForCausalLM has none (--disable-bias-linear)");
  return why;
}

nlohmann::ordered_json moe_config_json(const ModelConfig& c, nlohmann::ordered_json cfg) {
  const bool qwen3_moe = is_qwen3_moe_model(c);
  const std::vector<std::string> why = moe_export_problems(c);
  if (!why.empty()) {
    std::string message = std::string("HuggingFace export as ") +
                          (qwen3_moe ? "Qwen3MoeForCausalLM" : "MixtralForCausalLM") +
                          " cannot express this model:";
    for (const std::string& w : why) message += "\n    " + w;
    throw std::invalid_argument(message);
  }
  const MoeConfig& m = c.moe;
  cfg["architectures"] = {qwen3_moe ? "Qwen3MoeForCausalLM" : "MixtralForCausalLM"};
  cfg["model_type"] = qwen3_moe ? "qwen3_moe" : "mixtral";
  cfg["num_experts_per_tok"] = m.router_topk;
  cfg["output_router_logits"] = false;
  if (qwen3_moe) {
    nlohmann::ordered_json dense = nlohmann::ordered_json::array();
    for (int l = 0; l < c.num_layers; ++l)
      if (!c.is_moe_layer(l)) dense.push_back(l);
    cfg["num_experts"] = m.num_experts;
    cfg["moe_intermediate_size"] = c.moe_ffn();
    cfg["norm_topk_prob"] = !m.router_pre_softmax;
    cfg["decoder_sparse_step"] = 1;  // the pattern said layer by layer
    cfg["mlp_only_layers"] = dense;
    return cfg;
  }
  cfg["intermediate_size"] = c.moe_ffn();  // Mixtral's experts' width
  cfg["num_local_experts"] = m.num_experts;
  cfg["router_jitter_noise"] = 0.0;
  cfg["sliding_window"] = c.window_size > 0 ? nlohmann::ordered_json(c.window_size) : nullptr;
  cfg.erase("attention_bias");
  cfg.erase("mlp_bias");
  return cfg;
}

HfMoeTraining read_hf_moe_training(const std::string& dir) {
  HfMoeTraining t;
  std::ifstream in(std::filesystem::path(dir) / "config.json", std::ios::binary);
  const json j = json::parse(in, nullptr, false);
  if (!j.is_object()) return t;
  t.mixtral = is_mixtral_config(j);
  if (j.contains("router_aux_loss_coef") && j["router_aux_loss_coef"].is_number())
    t.router_aux_loss_coef = j["router_aux_loss_coef"].get<double>();
  if (j.contains("router_jitter_noise") && j["router_jitter_noise"].is_number())
    t.router_jitter_noise = j["router_jitter_noise"].get<double>();
  return t;
}

}  // namespace trident::io
