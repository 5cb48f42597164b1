#include "checkpoint/manifest.h"

#include <cfloat>
#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace trident::checkpoint {

namespace {

using json = nlohmann::ordered_json;

// Tensors are vectors or matrices; each dimension below 2^31 keeps every element count
// (and index) of a tensor within a long.
constexpr long kMaxDim = 1l << 31;

class Checker {
 public:
  explicit Checker(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const std::string& where, const std::string& why) const {
    throw CheckpointError(path_ + ": " + where + " " + why);
  }
  const json& object(const json& parent, const std::string& key, const std::string& where) const {
    const json& v = member(parent, key, where);
    if (!v.is_object()) fail(where + key, "must be an object");
    return v;
  }
  const json& array(const json& parent, const std::string& key, const std::string& where) const {
    const json& v = member(parent, key, where);
    if (!v.is_array()) fail(where + key, "must be an array");
    return v;
  }
  const std::string& string(const json& parent, const std::string& key,
                            const std::string& where) const {
    const json& v = member(parent, key, where);
    if (!v.is_string()) fail(where + key, "must be a string");
    return v.get_ref<const std::string&>();
  }
  // An integer in [lo, hi].
  long integer(const json& parent, const std::string& key, const std::string& where, long lo,
               long hi) const {
    const json& v = member(parent, key, where);
    if (!integer_in(v, lo, hi))
      fail(where + key,
           "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return v.get<long>();
  }
  // A number above zero also as a float: not rounded to 0, not beyond float's range.
  void positive_float(const json& parent, const std::string& key, const std::string& where) const {
    const json& v = member(parent, key, where);
    if (!v.is_number() || !(v.get<double>() > 0) || v.get<double>() > FLT_MAX ||
        v.get<float>() == 0)
      fail(where + key, "must be a positive number (float range)");
  }
  std::vector<long> shape(const json& parent, const std::string& key,
                          const std::string& where) const {
    const json& a = array(parent, key, where);
    if (a.empty() || a.size() > 2) fail(where + key, "must have 1 or 2 dimensions");
    std::vector<long> s;
    for (const json& d : a) {
      if (!integer_in(d, 0, kMaxDim - 1))
        fail(where + key, "entries must be integers in [0, 2^31)");
      s.push_back(d.get<long>());
    }
    return s;
  }

 private:
  // hi >= 0. The parser keeps every non-negative integer as unsigned, up to 2^64 - 1.
  static bool integer_in(const json& v, long lo, long hi) {
    if (v.is_number_unsigned())
      return v.get<std::uint64_t>() <= (std::uint64_t)hi && (long)v.get<std::uint64_t>() >= lo;
    return v.is_number_integer() && v.get<long>() >= lo && v.get<long>() <= hi;
  }
  const json& member(const json& parent, const std::string& key, const std::string& where) const {
    auto it = parent.find(key);
    if (it == parent.end()) fail(where + key, "is missing");
    return *it;
  }
  std::string path_;
};

void check_tensor(const Checker& check, const json& t, const std::string& where) {
  if (!t.is_object()) check.fail(where, "must be an object");
  check.string(t, "name", where);
  const std::vector<long> global = check.shape(t, "global_shape", where);
  const std::vector<long> local = check.shape(t, "local_shape", where);
  const json& shard = check.object(t, "shard", where);
  const std::string at = where + "shard.";
  const long dim = check.integer(shard, "dim", at, -1, (long)global.size() - 1);
  const long stride = check.integer(shard, "stride", at, 1, INT_MAX);
  const long parts = check.integer(shard, "parts", at, 1, INT_MAX);
  check.integer(shard, "rank", at, 0, parts - 1);
  if (local.size() != global.size())
    check.fail(where, "local_shape and global_shape differ in rank");
  for (size_t d = 0; d < global.size(); ++d) {
    if ((long)d != dim && local[d] != global[d])
      check.fail(where, "local_shape differs from global_shape outside the shard dimension");
  }
  if (dim >= 0 && (global[dim] % (stride * parts) != 0 || local[dim] * parts != global[dim]))
    check.fail(where, "local_shape is not 1/" + std::to_string(parts) + " of global_shape in " +
                          std::to_string(stride) + " equal blocks");
}

// The Qwen family's options, likewise present only when set.
void check_qwen_options(const Checker& check, const json& model) {
  for (const char* key : {"add_qkv_bias", "qk_layernorm"})
    if (model.contains(key) && !model[key].is_boolean())
      check.fail("model." + std::string(key), "must be a boolean");
  if (model.contains("kv_channels")) check.integer(model, "kv_channels", "model.", 1, INT_MAX);
}

// Llama 3.x RoPE scaling ("rope_scaling": its type and factors) and the sliding window,
// present only when used.
void check_scaling_and_window(const Checker& check, const json& model) {
  if (model.contains("window_size")) check.integer(model, "window_size", "model.", 1, INT_MAX);
  if (!model.contains("rope_scaling")) return;
  const json& r = check.object(model, "rope_scaling", "model.");
  check.string(r, "type", "model.rope_scaling.");
  for (const char* key : {"factor", "low_freq_factor", "high_freq_factor"})
    check.positive_float(r, key, "model.rope_scaling.");
  check.integer(r, "original_max_position_embeddings", "model.rope_scaling.", 1, INT_MAX);
}

// The MoE shape, present only for a model with experts (validate_model_config checks the
// values again when the run uses them).
void check_moe(const Checker& check, const json& model) {
  if (!model.contains("moe")) return;
  const json& e = check.object(model, "moe", "model.");
  for (const char* key : {"num_experts", "router_topk", "ffn_hidden_size"})
    check.integer(e, key, "model.moe.", 1, INT_MAX);
  if (!e.contains("router_pre_softmax") || !e["router_pre_softmax"].is_boolean())
    check.fail("model.moe.router_pre_softmax", "must be a boolean");
  if (!e.contains("router_topk_scaling_factor") || !e["router_topk_scaling_factor"].is_number())
    check.fail("model.moe.router_topk_scaling_factor", "must be a number");
  if (e.contains("shared_expert_intermediate_size"))
    check.integer(e, "shared_expert_intermediate_size", "model.moe.", 1, INT_MAX);
  if (e.contains("shared_expert_gate") && !e["shared_expert_gate"].is_boolean())
    check.fail("model.moe.shared_expert_gate", "must be a boolean");
  const json& pattern = check.array(e, "layer_pattern", "model.moe.");
  if (pattern.size() != (size_t)model["num_layers"].get<long>())
    check.fail("model.moe.layer_pattern", "must have one entry per layer");
  for (const json& on : pattern)
    if (!on.is_number_integer() || (on != 0 && on != 1))
      check.fail("model.moe.layer_pattern", "entries must be 0 or 1");
}

// LoRA's adapters (a checkpoint of adapters alone) and the identity of their base.
void check_lora(const Checker& check, const json& lora, const json& manifest) {
  check.integer(lora, "rank", "model.lora.", 1, INT_MAX);
  check.positive_float(lora, "alpha", "model.lora.");
  if (!lora.contains("dropout") || !lora["dropout"].is_number())
    check.fail("model.lora.dropout", "must be a number");
  for (const json& m : check.array(lora, "target_modules", "model.lora."))
    if (!m.is_string()) check.fail("model.lora.target_modules", "must hold strings");
  const std::string& base = check.string(lora, "base_hf", "model.lora.");
  const json& recorded = check.object(manifest, "lora_base", "");
  if (base.empty()) {
    check.integer(recorded, "seed", "lora_base.", 0, LONG_MAX);
    return;
  }
  if (check.string(recorded, "load_hf", "lora_base.") != base)
    check.fail("lora_base.load_hf", "must be model.lora.base_hf");
  for (const auto& [name, bytes] : check.object(recorded, "files", "lora_base.").items())
    if (!bytes.is_number_integer() || bytes.get<long>() < 0)
      check.fail("lora_base.files." + name, "must be a byte count");
}

// The Llama family's options, present only when they differ from GPT-2's block; their
// values are checked again by validate_model_config when the run uses them.
void check_llama_options(const Checker& check, const json& model) {
  for (const char* key : {"normalization", "position_embedding_type"})
    if (model.contains(key)) check.string(model, key, "model.");
  for (const char* key : {"rotary_base", "rotary_percent"})
    if (model.contains(key)) check.positive_float(model, key, "model.");
  if (model.contains("num_query_groups"))
    check.integer(model, "num_query_groups", "model.", 1, INT_MAX);
  for (const char* key : {"swiglu", "untie_embeddings_and_output_weights", "disable_bias_linear"})
    if (model.contains(key) && !model[key].is_boolean())
      check.fail("model." + std::string(key), "must be a boolean");
  check_qwen_options(check, model);
  check_scaling_and_window(check, model);
  check_moe(check, model);
}
}  // namespace

json parse_manifest(const std::string& text, const std::string& path) {
  json m;
  try {
    m = json::parse(text);
  } catch (const std::exception& e) {
    throw CheckpointError(path + ": not valid JSON: " + e.what());
  }
  const Checker check(path);
  if (!m.is_object()) check.fail("the manifest", "must be a JSON object");
  if (!m.contains("format") || m["format"] != "trident-checkpoint")
    throw CheckpointError(path + ": not a trident checkpoint");
  check.integer(m, "version", "", 0, INT_MAX);
  for (const char* key : {"iteration", "consumed_samples", "evaluations", "optimizer_steps"})
    check.integer(m, key, "", 0, LONG_MAX);
  if (m.contains("lr_schedule_samples")) check.integer(m, "lr_schedule_samples", "", 0, LONG_MAX);
  const json& model = check.object(m, "model", "");
  for (const char* key : {"num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size",
                          "max_position_embeddings", "vocab_size"})
    check.integer(model, key, "model.", 1, INT_MAX);
  check.positive_float(model, "layernorm_epsilon", "model.");
  check_llama_options(check, model);
  if (model.contains("lora")) check_lora(check, model["lora"], m);
  const json& layout = check.object(m, "layout", "");
  for (const char* key : {"tensor", "pipeline", "data"})
    check.integer(layout, key, "layout.", 1, INT_MAX);
  if (m.contains("run")) check.object(m, "run", "");
  if (m.contains("loss_scaler")) {
    const json& ls = check.object(m, "loss_scaler", "");
    check.positive_float(ls, "scale", "loss_scaler.");
    check.integer(ls, "growth_tracker", "loss_scaler.", 0, LONG_MAX);
    check.integer(ls, "hysteresis_tracker", "loss_scaler.", INT_MIN, INT_MAX);
    check.integer(ls, "skipped_iterations", "loss_scaler.", 0, LONG_MAX);
  }
  const json& files = check.array(m, "files", "");
  for (size_t f = 0; f < files.size(); ++f) {
    const std::string where = "files[" + std::to_string(f) + "].";
    if (!files[f].is_object()) check.fail("files[" + std::to_string(f) + "]", "must be an object");
    const std::string& name = check.string(files[f], "file", where);
    // A name inside the checkpoint directory, nothing that leads out of it.
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos)
      check.fail(where + "file", "must be a plain file name");
    check.integer(files[f], "bytes", where, 0, LONG_MAX);
    check.string(files[f], "xxh64", where);
    const json& tensors = check.array(files[f], "tensors", where);
    for (size_t t = 0; t < tensors.size(); ++t)
      check_tensor(check, tensors[t], where + "tensors[" + std::to_string(t) + "].");
  }
  return m;
}

json read_manifest(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "manifest.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(path + ": missing");
  std::stringstream text;
  text << in.rdbuf();
  return parse_manifest(text.str(), path);
}

ModelConfig manifest_model(const json& manifest) {
  const json& m = manifest["model"];
  ModelConfig c;
  c.num_layers = m["num_layers"], c.hidden_size = m["hidden_size"];
  c.num_attention_heads = m["num_attention_heads"], c.ffn_hidden_size = m["ffn_hidden_size"];
  c.max_position_embeddings = m["max_position_embeddings"], c.vocab_size = m["vocab_size"];
  c.layernorm_epsilon = m["layernorm_epsilon"].get<float>();
  c.seq_length = c.max_position_embeddings;
  c.normalization = m.value("normalization", c.normalization);
  c.position_embedding_type = m.value("position_embedding_type", c.position_embedding_type);
  c.rotary_base = m.value("rotary_base", c.rotary_base);
  c.rotary_percent = m.value("rotary_percent", c.rotary_percent);
  c.swiglu = m.value("swiglu", false);
  c.group_query_attention = m.contains("num_query_groups");
  if (c.group_query_attention) c.num_query_groups = m["num_query_groups"];
  c.untie_embeddings_and_output_weights = m.value("untie_embeddings_and_output_weights", false);
  c.disable_bias_linear = m.value("disable_bias_linear", false);
  c.add_qkv_bias = m.value("add_qkv_bias", false);
  c.qk_layernorm = m.value("qk_layernorm", false);
  c.kv_channels = m.value("kv_channels", 0);
  c.window_size = m.value("window_size", 0);
  if (m.contains("rope_scaling")) {
    const json& r = m["rope_scaling"];
    c.use_rope_scaling = true, c.rope_scaling_type = r["type"];
    c.rope_scaling_factor = r["factor"].get<float>();
    c.rope_low_freq_factor = r["low_freq_factor"].get<float>();
    c.rope_high_freq_factor = r["high_freq_factor"].get<float>();
    c.rope_original_max_positions = r["original_max_position_embeddings"];
  }
  if (m.contains("lora")) {
    const json& l = m["lora"];
    c.lora.rank = l["rank"], c.lora.alpha = l["alpha"].get<float>();
    c.lora.dropout = l["dropout"].get<float>();
    c.lora.target_modules = l["target_modules"].get<std::vector<std::string>>();
    c.lora.base_hf = l["base_hf"];
  }
  if (m.contains("moe")) {
    const json& e = m["moe"];
    c.moe.num_experts = e["num_experts"], c.moe.router_topk = e["router_topk"];
    c.moe.ffn_hidden_size = e["ffn_hidden_size"];
    c.moe.router_pre_softmax = e["router_pre_softmax"];
    c.moe.router_topk_scaling_factor = e["router_topk_scaling_factor"].get<float>();
    for (int on : e["layer_pattern"].get<std::vector<int>>()) c.moe.layer_pattern.push_back(on);
    // Written only for a model with shared experts (older manifests have none).
    c.moe.shared_expert_intermediate_size = e.value("shared_expert_intermediate_size", 0);
    c.moe.shared_expert_gate = e.value("shared_expert_gate", false);
  }
  return c;
}

ParamSpec manifest_spec(const json& t) {
  ParamSpec s;
  s.name = t["name"];
  s.global_shape = t["global_shape"].get<std::vector<long>>();
  s.local_shape = t["local_shape"].get<std::vector<long>>();
  const json& shard = t["shard"];
  s.shard = {shard["dim"], shard["stride"], shard["parts"], shard["rank"]};
  return s;
}

namespace {
// The MoE shape (issue 32), written only for a model with experts: what builds its layers.
json moe_json(const ModelConfig& m) {
  json j = {{"num_experts", m.moe.num_experts},
            {"router_topk", m.moe.router_topk},
            {"ffn_hidden_size", m.moe_ffn()},
            {"router_pre_softmax", m.moe.router_pre_softmax},
            {"router_topk_scaling_factor", m.moe.router_topk_scaling_factor}};
  std::vector<int> pattern;
  for (int l = 0; l < m.num_layers; ++l) pattern.push_back(m.is_moe_layer(l) ? 1 : 0);
  j["layer_pattern"] = pattern;
  if (m.moe.shared_expert_intermediate_size > 0) {
    j["shared_expert_intermediate_size"] = m.moe.shared_expert_intermediate_size;
    j["shared_expert_gate"] = m.moe.shared_expert_gate;
  }
  return j;
}
}  // namespace

// The Llama family's options are written only when they differ from GPT-2's block, so a
// GPT-2 checkpoint's manifest is what it was before they existed.
json model_json(const ModelConfig& m) {
  json j = {{"num_layers", m.num_layers},
            {"hidden_size", m.hidden_size},
            {"num_attention_heads", m.num_attention_heads},
            {"ffn_hidden_size", m.ffn()},
            {"max_position_embeddings", m.max_positions()},
            {"vocab_size", m.vocab_size},
            {"layernorm_epsilon", m.layernorm_epsilon}};
  if (m.rms_norm()) j["normalization"] = m.normalization;
  if (m.rope()) {
    j["position_embedding_type"] = m.position_embedding_type;
    j["rotary_base"] = m.rotary_base, j["rotary_percent"] = m.rotary_percent;
  }
  if (m.swiglu) j["swiglu"] = true;
  if (m.group_query_attention) j["num_query_groups"] = m.num_query_groups;
  if (!m.tied_output()) j["untie_embeddings_and_output_weights"] = true;
  if (m.disable_bias_linear) j["disable_bias_linear"] = true;
  if (m.add_qkv_bias) j["add_qkv_bias"] = true;
  if (m.qk_layernorm) j["qk_layernorm"] = true;
  if (m.kv_channels > 0) j["kv_channels"] = m.kv_channels;
  if (m.use_rope_scaling)
    j["rope_scaling"] = {{"type", m.rope_scaling_type},
                         {"factor", m.rope_scaling_factor},
                         {"low_freq_factor", m.rope_low_freq_factor},
                         {"high_freq_factor", m.rope_high_freq_factor},
                         {"original_max_position_embeddings", m.rope_original_max_positions}};
  if (m.window_size > 0) j["window_size"] = m.window_size;
  if (m.moe.enabled()) j["moe"] = moe_json(m);
  if (m.lora.enabled())
    j["lora"] = {{"rank", m.lora.rank},
                 {"alpha", m.lora.alpha},
                 {"dropout", m.lora.dropout},
                 {"target_modules", m.lora.target_modules},
                 {"base_hf", m.lora.base_hf}};
  return j;
}

namespace {
// The files that make a HuggingFace directory's model (config.json and the weights), by name.
std::map<std::string, long> base_files(const std::string& dir) {
  std::map<std::string, long> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    const bool weights =
        name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0;
    if (e.is_regular_file() && (weights || name == "config.json"))
      files[name] = (long)e.file_size();
  }
  return files;
}
}  // namespace

json lora_base_json(const LoraConfig& lora, std::uint64_t seed) {
  if (lora.base_hf.empty()) return {{"seed", seed}};
  json files = json::object();
  for (const auto& [name, bytes] : base_files(lora.base_hf)) files[name] = bytes;
  return {{"load_hf", lora.base_hf}, {"files", files}};
}

void check_lora_base(const json& base, const std::string& manifest_path) {
  if (!base.contains("load_hf")) return;  // drawn from the seed, which the model records
  const std::string dir = base["load_hf"];
  std::map<std::string, long> want;
  for (const auto& [name, bytes] : base["files"].items()) want[name] = bytes.get<long>();
  std::map<std::string, long> have;
  try {
    have = base_files(dir);
  } catch (const std::exception& e) {
    throw CheckpointError(manifest_path + ": the LoRA base " + dir +
                          " cannot be read: " + e.what());
  }
  if (have != want)
    throw CheckpointError(manifest_path + ": the LoRA base " + dir +
                          " is not the one the adapters were trained on (its config.json and "
                          "*.safetensors files differ in name or size from the recorded " +
                          base["files"].dump() + ")");
}

json spec_json(const ParamSpec& s) {
  return {{"name", s.name},
          {"global_shape", s.global_shape},
          {"local_shape", s.local_shape},
          {"shard",
           {{"dim", s.shard.dim},
            {"stride", s.shard.stride},
            {"parts", s.shard.parts},
            {"rank", s.shard.rank}}}};
}

}  // namespace trident::checkpoint
