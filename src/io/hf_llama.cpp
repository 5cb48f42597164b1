#include "io/hf_llama.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>

#include "io/hf_llama_options.h"
#include "io/hf_moe.h"
#include "io/hf_qwen.h"
#include "io/safetensors.h"

namespace trident::io {

namespace fs = std::filesystem;

namespace {

// The HF tensors a trident parameter is made of, stacked along dimension 0 (an MoE layer's
// under Mixtral's or Qwen3-MoE's names, hf_moe.h).
std::vector<std::string> hf_pieces(const std::string& n, bool qwen3_moe) {
  if (n == "embedding.word_embeddings.weight") return {"model.embed_tokens.weight"};
  if (n == "final_layernorm.weight") return {"model.norm.weight"};
  if (n == "output_layer.weight") return {"lm_head.weight"};
  if (n.rfind("layers.", 0) != 0) throw std::out_of_range("no HF Llama name for parameter " + n);
  const size_t dot = n.find('.', 7);
  const std::string pre = "model.layers." + n.substr(7, dot - 7) + ".", leaf = n.substr(dot + 1);
  const size_t last = leaf.rfind('.');
  const std::string module = leaf.substr(0, last), kind = leaf.substr(last);  // ".weight"
  std::vector<std::string> names;
  for (const std::string& m : moe_hf_modules(module, qwen3_moe)) names.push_back(pre + m + kind);
  if (!names.empty()) return names;
  static const std::map<std::string, std::vector<std::string>> modules = {
      {"input_layernorm", {"input_layernorm"}},
      {"post_attention_layernorm", {"post_attention_layernorm"}},
      {"self_attention.linear_q", {"self_attn.q_proj"}},
      // A model trained without --group-query-attention: one key/value head per query head.
      {"self_attention.linear_qkv", {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"}},
      {"self_attention.linear_kv", {"self_attn.k_proj", "self_attn.v_proj"}},
      {"self_attention.linear_proj", {"self_attn.o_proj"}},
      {"self_attention.q_layernorm", {"self_attn.q_norm"}},  // Qwen3 (hf_qwen.h)
      {"self_attention.k_layernorm", {"self_attn.k_norm"}},
      {"mlp.linear_fc1", {"mlp.gate_proj", "mlp.up_proj"}},
      {"mlp.linear_fc2", {"mlp.down_proj"}}};
  auto it = modules.find(module);
  if (it == modules.end()) throw std::out_of_range("no HF Llama name for parameter " + n);
  for (const std::string& m : it->second) names.push_back(pre + m + kind);
  return names;
}

bool is_vocab(const std::string& n) {
  return n == "embedding.word_embeddings.weight" || n == "output_layer.weight";
}

// model.safetensors, or the shards an index names, opened as tensors are asked for.
class LlamaFiles {
 public:
  explicit LlamaFiles(const std::string& dir) : dir_(dir) {
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    if (!fs::exists(index)) {
      single_ = std::make_unique<SafetensorsFile>((fs::path(dir) / "model.safetensors").string());
      return;
    }
    std::ifstream in(index, std::ios::binary);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      throw FormatError(index.string() + ": not valid JSON: " + e.what());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw FormatError(index.string() + ": must hold an object \"weight_map\"");
    for (const auto& [name, file] : j["weight_map"].items()) {
      const std::string f = file.is_string() ? file.get<std::string>() : "";
      // A file beside the index, nothing that leads out of the directory.
      if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
        throw FormatError(index.string() + ": weight_map[\"" + name +
                          "\"] must be a plain file name");
      weight_map_[name] = f;
    }
  }
  // The file holding `name`, or null.
  const SafetensorsFile* file_of(const std::string& name) {
    if (single_) return single_->find(name) ? single_.get() : nullptr;
    auto it = weight_map_.find(name);
    if (it == weight_map_.end()) return nullptr;
    auto& f = open_[it->second];
    if (!f) f = std::make_unique<SafetensorsFile>((fs::path(dir_) / it->second).string());
    if (!f->find(name))
      throw FormatError(f->path() + ": missing tensor '" + name + "' (the index names it here)");
    return f.get();
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    if (single_)
      for (const TensorEntry& t : single_->tensors()) out.push_back(t.name);
    for (const auto& [name, file] : weight_map_) out.push_back(name);
    return out;
  }
  std::string where() const {
    return (fs::path(dir_) / (single_ ? "model.safetensors" : "model.safetensors.index.json"))
        .string();
  }

 private:
  std::string dir_;
  std::unique_ptr<SafetensorsFile> single_;
  std::map<std::string, std::string> weight_map_;
  std::map<std::string, std::unique_ptr<SafetensorsFile>> open_;
};

std::string shape_str(const std::vector<long>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// The global tensor of `spec` from its HF pieces (padded vocabulary rows stay zero).
// An expert's matrix from transformers v5's fused tensor of its layer (hf_moe.h), into out;
// false when the directory has no such tensor.
bool read_v5_expert(LlamaFiles& files, const ParamSpec& spec, int experts, float* out) {
  const FusedExpert fused = v5_fused_expert(spec.name);
  const SafetensorsFile* f = fused.tensor.empty() ? nullptr : files.file_of(fused.tensor);
  if (!f) return false;
  const TensorEntry& e = *f->find(fused.tensor);
  const std::vector<long> expected = {experts, spec.global_shape[0], spec.global_shape[1]};
  if (e.shape != expected)
    throw FormatError(f->path() + ": tensor '" + e.name + "' has shape " + shape_str(e.shape) +
                      ", the config needs " + shape_str(expected));
  const long n = spec.global_shape[0] * spec.global_shape[1];
  f->copy_float_range(e, fused.expert * n, n, out);
  return true;
}

std::vector<float> global_tensor(LlamaFiles& files, const ParamSpec& spec,
                                 const ModelConfig& config) {
  std::vector<std::string> pieces = hf_pieces(spec.name, is_qwen3_moe_model(config));
  const int vocab = config.vocab_size;
  const long cols = spec.global_shape.size() == 2 ? spec.global_shape[1] : 1;
  const long rows = is_vocab(spec.name) ? vocab : spec.global_shape[0];
  std::vector<float> out((size_t)spec.global_shape[0] * cols, 0.f);
  if (!files.file_of(pieces[0]) && read_v5_expert(files, spec, config.moe.num_experts, out.data()))
    return out;
  const long piece_rows = rows / (long)pieces.size();
  for (size_t k = 0; k < pieces.size(); ++k) {
    if (!files.file_of(pieces[k]) && files.file_of(v5_renamed(pieces[k])))
      pieces[k] = v5_renamed(pieces[k]);
    const SafetensorsFile* f = files.file_of(pieces[k]);
    if (!f) throw FormatError(files.where() + ": missing tensor '" + pieces[k] + "'");
    const TensorEntry& e = *f->find(pieces[k]);
    std::vector<long> expected = {piece_rows};
    if (spec.global_shape.size() == 2) expected.push_back(cols);
    if (e.shape != expected)
      throw FormatError(f->path() + ": tensor '" + e.name + "' has shape " + shape_str(e.shape) +
                        ", the config needs " + shape_str(expected));
    f->copy_float(e, out.data() + k * piece_rows * cols);
  }
  return out;
}

}  // namespace

bool is_llama_config(const nlohmann::json& j) {
  if (j.contains("model_type") && j["model_type"] == "llama") return true;
  if (j.contains("architectures") && j["architectures"].is_array())
    for (const auto& a : j["architectures"])
      if (a == "LlamaForCausalLM") return true;
  return is_mistral_config(j);
}

bool is_llama_model(const ModelConfig& c) {
  return c.rms_norm() && c.rope() && c.swiglu && c.group_query_attention && c.rotary_percent == 1.f;
}

namespace {

// HF's head_dim (Mistral-Nemo: 128 with hidden 5120 / 32 heads) is Megatron's
// --kv-channels; without it heads are hidden_size / num_attention_heads wide.
void parse_head_dim(const nlohmann::json& j, ModelConfig& c, std::vector<std::string>& problems) {
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    const nlohmann::json& d = j["head_dim"];
    if (!d.is_number_integer() || d.get<long>() <= 0 || d.get<long>() > 65536)
      problems.push_back("\"head_dim\" is " + d.dump() + ": must be a positive integer");
    else if (c.num_attention_heads <= 0 || c.hidden_size <= 0 ||
             d.get<long>() * c.num_attention_heads != c.hidden_size)
      c.kv_channels = d.get<int>();
  } else if (c.hidden_size > 0 && c.num_attention_heads > 0 &&
             c.hidden_size % c.num_attention_heads) {
    problems.push_back(
        "hidden_size must be divisible by num_attention_heads (or \"head_dim\" given)");
  }
}

}  // namespace

ModelConfig parse_llama_config(const nlohmann::json& j, std::vector<std::string>& problems) {
  auto get_int = [&](const char* key, int fallback) -> int {
    if (!j.contains(key) || j[key].is_null()) {
      if (fallback < 0) problems.push_back(std::string("missing key \"") + key + "\"");
      return fallback;
    }
    if (!j[key].is_number_integer() || j[key].get<long>() <= 0 ||
        j[key].get<long>() > std::numeric_limits<int>::max()) {
      problems.push_back(std::string("\"") + key + "\" must be a positive integer");
      return 0;
    }
    return j[key].get<int>();
  };
  auto get_float = [&](const char* key, float fallback) {
    if (!j.contains(key)) return fallback;
    const nlohmann::json& v = j[key];
    if (!v.is_number() || !(v.get<double>() > 0) ||
        v.get<double>() > std::numeric_limits<float>::max() || v.get<float>() == 0) {
      problems.push_back(std::string("\"") + key +
                         "\" must be a positive number within float's range");
      return fallback;
    }
    return v.get<float>();
  };
  auto get_bool = [&](const char* key, bool fallback) {
    if (!j.contains(key)) return fallback;
    if (!j[key].is_boolean()) {
      problems.push_back(std::string("\"") + key + "\" must be true or false");
      return fallback;
    }
    return j[key].get<bool>();
  };
  ModelConfig c;
  c.num_layers = get_int("num_hidden_layers", -1);
  c.hidden_size = get_int("hidden_size", -1);
  c.num_attention_heads = get_int("num_attention_heads", -1);
  c.ffn_hidden_size = get_int("intermediate_size", -1);
  c.vocab_size = get_int("vocab_size", -1);
  c.max_position_embeddings = get_int("max_position_embeddings", -1);
  c.seq_length = c.max_position_embeddings;
  c.group_query_attention = true;
  c.num_query_groups = get_int("num_key_value_heads", c.num_attention_heads);
  c.normalization = "RMSNorm";
  c.layernorm_epsilon = get_float("rms_norm_eps", 1e-6f);
  c.position_embedding_type = "rope";
  c.rotary_base = get_float("rope_theta", 10000.f);
  c.swiglu = true;
  c.untie_embeddings_and_output_weights = !get_bool("tie_word_embeddings", false);
  const bool attention_bias = get_bool("attention_bias", false);
  const bool mlp_bias = get_bool("mlp_bias", false);
  if (attention_bias != mlp_bias)
    problems.push_back(
        "\"attention_bias\" and \"mlp_bias\" differ: trident's linears all have "
        "biases or none (--disable-bias-linear)");
  c.disable_bias_linear = !attention_bias;
  parse_rope_scaling(j, c, problems);
  parse_sliding_window(j, c, problems);
  // Options under which HF computes another function than trident does.
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    problems.push_back("\"hidden_act\" is " + j["hidden_act"].dump() +
                       ": trident's SwiGLU uses silu");
  if (j.contains("pretraining_tp") && j["pretraining_tp"] != 1)
    problems.push_back("\"pretraining_tp\" is " + j["pretraining_tp"].dump() +
                       ": trident computes the linears whole (pretraining_tp 1)");
  if (j.contains("partial_rotary_factor") && j["partial_rotary_factor"] != 1.0)
    problems.push_back("\"partial_rotary_factor\" is " + j["partial_rotary_factor"].dump() +
                       ": LlamaForCausalLM rotates whole heads");
  parse_head_dim(j, c, problems);
  if (c.num_attention_heads > 0 && c.num_query_groups > 0 &&
      c.num_attention_heads % c.num_query_groups)
    problems.push_back("num_attention_heads must be divisible by num_key_value_heads");
  return c;
}

void load_llama_weights(const std::string& dir, const ModelConfig& config, Parameters& params) {
  LlamaFiles files(dir);
  for (const ParamSpec& spec : params.layout().specs()) {
    std::vector<float> global = global_tensor(files, spec, config);
    float* dst = params.values() + spec.offset;
    for (long i = 0, run; i < spec.numel(); i += run) {  // a shard is runs of the global tensor
      run = spec.contiguous_run(i);
      std::copy_n(global.data() + spec.global_index(i), run, dst + i);
    }
  }
  // Every tensor of the directory is part of the model (checked against the whole model: a
  // pipeline chunk holds only part). A tied model's lm_head.weight copy is not read.
  const ParameterLayout whole(config, {0, 1});
  std::map<std::string, bool> known;
  for (const ParamSpec& spec : whole.specs())
    for (const std::string& n : hf_pieces(spec.name, is_qwen3_moe_model(config))) known[n] = true;
  for (int l = 0; l < config.num_layers; ++l)  // transformers v5's fused experts
    if (config.is_moe_layer(l))
      for (const std::string& n : v5_moe_tensors(l)) known[n] = true;
  for (const std::string& n : files.names()) {
    const bool buffer = n.ends_with(".rotary_emb.inv_freq");  // older files keep it
    if (!buffer && !known.count(n) && !(config.tied_output() && n == "lm_head.weight"))
      throw FormatError(files.where() + ": unexpected tensor '" + n +
                        "' (not part of a Llama model with this config)");
  }
}

const char* hf_torch_dtype(StoredDtype dtype) {
  return dtype == StoredDtype::kBF16 ? "bfloat16" : "float32";
}

StoredDtype hf_weights_dtype(const std::string& dir) {
  LlamaFiles files(dir);
  bool all_bf16 = true, any = false;
  for (const std::string& n : files.names()) {
    // Buffers older files keep (GPT-2's attention masks, Llama's inv_freq) are no weights.
    if (n.ends_with(".attn.bias") || n.ends_with(".attn.masked_bias") ||
        n.ends_with(".rotary_emb.inv_freq"))
      continue;
    const SafetensorsFile* f = files.file_of(n);
    any = true;
    all_bf16 = all_bf16 && f && f->find(n)->dtype == "BF16";
  }
  return any && all_bf16 ? StoredDtype::kBF16 : StoredDtype::kF32;
}

void save_llama_model(const std::string& dir, const ModelConfig& config, const Parameters& params,
                      bool gradients, StoredDtype dtype) {
  nlohmann::ordered_json cfg = {{"architectures", {"LlamaForCausalLM"}},
                                {"model_type", "llama"},
                                {"hidden_act", "silu"},
                                {"num_hidden_layers", config.num_layers},
                                {"hidden_size", config.hidden_size},
                                {"intermediate_size", config.ffn()},
                                {"num_attention_heads", config.num_attention_heads},
                                {"num_key_value_heads", config.query_groups()},
                                {"head_dim", config.head_dim()},
                                {"max_position_embeddings", config.max_positions()},
                                {"vocab_size", config.vocab_size},
                                {"rms_norm_eps", config.layernorm_epsilon},
                                {"rope_theta", config.rotary_base},
                                {"rope_scaling", rope_scaling_json(config)},
                                {"attention_bias", config.add_bias_linear()},
                                {"mlp_bias", config.add_bias_linear()},
                                {"tie_word_embeddings", config.tied_output()},
                                {"torch_dtype", "float32"}};
  if (is_qwen_model(config)) {
    if (config.window_size > 0)
      throw std::invalid_argument(
          "HuggingFace export of a Qwen model with --window-size is not implemented (Qwen2's "
          "use_sliding_window windows only some layers)");
    cfg = qwen_config_json(config);
    cfg["rope_scaling"] = rope_scaling_json(config);
  } else if (config.window_size > 0 && !config.moe.enabled()) {
    as_mistral(config, cfg);
  }
  if (config.moe.enabled()) cfg = moe_config_json(config, cfg);
  std::vector<TensorToWrite> tensors;
  const float* base = gradients ? params.grads() : params.values();
  for (const ParamSpec& spec : params.layout().specs()) {
    const std::vector<std::string> pieces = hf_pieces(spec.name, is_qwen3_moe_model(config));
    const long cols = spec.global_shape.size() == 2 ? spec.global_shape[1] : 1;
    const long rows = is_vocab(spec.name) ? config.vocab_size : spec.global_shape[0];
    const long piece_rows = rows / (long)pieces.size();
    for (size_t k = 0; k < pieces.size(); ++k) {
      std::vector<long> shape = {piece_rows};
      if (spec.global_shape.size() == 2) shape.push_back(cols);
      tensors.push_back({pieces[k], shape, base + spec.offset + k * piece_rows * cols, dtype});
    }
  }
  cfg["torch_dtype"] = hf_torch_dtype(dtype);
  fs::create_directories(dir);  // only once the model is known to be expressible
  write_safetensors((fs::path(dir) / "model.safetensors").string(), tensors,
                    {{"format", "pt"}, {"producer", "trident"}});
  write_file_atomically((fs::path(dir) / "config.json").string(), cfg.dump(2) + "\n");
}

}  // namespace trident::io
