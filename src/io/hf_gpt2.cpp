#include "io/hf_gpt2.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/hf_llama.h"
#include "io/hf_moe.h"
#include "io/hf_qwen.h"
#include "io/safetensors.h"

namespace trident::io {

namespace fs = std::filesystem;

HfName hf_name_for(const std::string& n) {
  static const std::vector<std::pair<std::string, HfName>> leaves = {
      {"input_layernorm.weight", {"ln_1.weight", false}},
      {"input_layernorm.bias", {"ln_1.bias", false}},
      {"self_attention.linear_qkv.weight", {"attn.c_attn.weight", true}},
      {"self_attention.linear_qkv.bias", {"attn.c_attn.bias", false}},
      {"self_attention.linear_proj.weight", {"attn.c_proj.weight", true}},
      {"self_attention.linear_proj.bias", {"attn.c_proj.bias", false}},
      {"post_attention_layernorm.weight", {"ln_2.weight", false}},
      {"post_attention_layernorm.bias", {"ln_2.bias", false}},
      {"mlp.linear_fc1.weight", {"mlp.c_fc.weight", true}},
      {"mlp.linear_fc1.bias", {"mlp.c_fc.bias", false}},
      {"mlp.linear_fc2.weight", {"mlp.c_proj.weight", true}},
      {"mlp.linear_fc2.bias", {"mlp.c_proj.bias", false}}};
  if (n == "embedding.word_embeddings.weight") return {"wte.weight", false};
  if (n == "embedding.position_embeddings.weight") return {"wpe.weight", false};
  if (n == "final_layernorm.weight") return {"ln_f.weight", false};
  if (n == "final_layernorm.bias") return {"ln_f.bias", false};
  if (n.rfind("layers.", 0) == 0) {
    size_t dot = n.find('.', 7);
    std::string layer = n.substr(7, dot - 7), leaf = n.substr(dot + 1);
    for (const auto& [ours, hf] : leaves)
      if (ours == leaf) return {"h." + layer + "." + hf.name, hf.transposed};
  }
  throw std::out_of_range("no HF GPT-2 name for parameter " + n);
}

namespace {

nlohmann::json parse_config_json(const std::string& text, const std::string& path) {
  auto fail = [&](const std::string& why) { throw FormatError(path + ": " + why); };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail(std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail("must be a JSON object");
  return j;
}

// The model's shape; what is missing or malformed goes to `problems`.
ModelConfig shape_of(const nlohmann::json& j, std::vector<std::string>& problems) {
  auto get_int = [&](const char* key) -> int {
    if (!j.contains(key)) {
      problems.push_back(std::string("missing key \"") + key + "\"");
    } else if (!j[key].is_number_integer() || j[key].get<long>() <= 0 ||
               j[key].get<long>() > std::numeric_limits<int>::max()) {
      problems.push_back(std::string("\"") + key + "\" must be a positive integer");
    } else {
      return j[key].get<int>();
    }
    return 0;
  };
  ModelConfig c;
  c.num_layers = get_int("n_layer");
  c.hidden_size = get_int("n_embd");
  c.num_attention_heads = get_int("n_head");
  c.vocab_size = get_int("vocab_size");
  c.max_position_embeddings = get_int("n_positions");
  c.seq_length = c.max_position_embeddings;
  // n_inner and layer_norm_epsilon are trident's --ffn-hidden-size and LayerNorm epsilon.
  if (j.contains("n_inner") && !j["n_inner"].is_null()) c.ffn_hidden_size = get_int("n_inner");
  if (j.contains("layer_norm_epsilon")) {
    // Positive also as the float LayerNorm adds: not rounded to 0, not beyond float's range.
    const nlohmann::json& e = j["layer_norm_epsilon"];
    if (!e.is_number() || !(e.get<double>() > 0) ||
        e.get<double>() > std::numeric_limits<float>::max() || e.get<float>() == 0)
      problems.push_back("\"layer_norm_epsilon\" must be a positive number within float's range");
    else
      c.layernorm_epsilon = e.get<float>();
  }
  if (c.hidden_size > 0 && c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads)
    problems.push_back("n_embd (" + std::to_string(c.hidden_size) +
                       ") must be divisible by n_head (" + std::to_string(c.num_attention_heads) +
                       ")");
  return c;
}

// GPT2Config options under which HF computes another function than trident does, each
// with its rule. reorder_and_upcast_attn is not one: it computes the same scores, only in
// fp32 and with the scale applied before Q K^T, which changes rounding in fp16/bf16 HF
// runs, not the model; trident's softmax and its statistics are fp32 in every precision.
void check_maths(const nlohmann::json& j, std::vector<std::string>& problems) {
  auto flag_is = [&](const char* key, bool value) {
    return j.contains(key) && j[key].is_boolean() && j[key].get<bool>() == value;
  };
  if (flag_is("tie_word_embeddings", false))
    problems.push_back(
        "\"tie_word_embeddings\" is false: trident ties the output layer to the word embedding "
        "(an untied output layer, Megatron's --untie-embeddings-and-output-weights, is not "
        "supported)");
  if (flag_is("scale_attn_weights", false))
    problems.push_back(
        "\"scale_attn_weights\" is false: trident scales attention scores by 1/sqrt(head_dim)");
  if (flag_is("scale_attn_by_inverse_layer_idx", true))
    problems.push_back(
        "\"scale_attn_by_inverse_layer_idx\" is true: trident scales attention scores by "
        "1/sqrt(head_dim) only, not also by 1/(layer index + 1)");
  if (flag_is("add_cross_attention", true))
    problems.push_back("\"add_cross_attention\" is true: trident's GPT-2 has no cross-attention");
  for (const char* key : {"tie_word_embeddings", "scale_attn_weights",
                          "scale_attn_by_inverse_layer_idx", "add_cross_attention"})
    if (j.contains(key) && !j[key].is_boolean())
      problems.push_back(std::string("\"") + key + "\" must be true or false");
  if (j.contains("activation_function")) {
    const nlohmann::json& act = j["activation_function"];
    // gelu_pytorch_tanh is the same tanh approximation as gelu_new, computed by PyTorch.
    if (act != "gelu_new" && act != "gelu_pytorch_tanh")
      problems.push_back("\"activation_function\" is " + act.dump() +
                         ": trident's MLP uses the tanh GeLU (gelu_new or gelu_pytorch_tanh)");
  }
  if (j.contains("model_type") && j["model_type"] != "gpt2")
    problems.push_back("\"model_type\" is " + j["model_type"].dump() +
                       ": trident loads GPT-2 models (model_type gpt2)");
  if (j.contains("architectures")) {
    const nlohmann::json& a = j["architectures"];
    bool ok = a.is_array();
    for (size_t i = 0; ok && i < a.size(); ++i)
      ok = a[i] == "GPT2LMHeadModel" || a[i] == "GPT2Model";
    if (!ok)
      problems.push_back("\"architectures\" is " + a.dump() +
                         ": trident loads GPT2LMHeadModel or GPT2Model");
  }
}

}  // namespace

ModelConfig read_hf_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw FormatError(path + ": cannot open (is " + dir + " a HuggingFace GPT-2 model directory?)");
  std::stringstream text;
  text << in.rdbuf();
  return parse_hf_config(text.str(), path);
}

ModelConfig parse_hf_config(const std::string& text, const std::string& path) {
  const nlohmann::json j = parse_config_json(text, path);
  std::vector<std::string> problems;
  ModelConfig c;
  if (is_moe_config(j)) {
    c = parse_moe_config(j, problems);
  } else if (is_qwen_config(j)) {
    c = parse_qwen_config(j, problems);
  } else if (is_llama_config(j)) {
    c = parse_llama_config(j, problems);
  } else {
    c = shape_of(j, problems);
    check_maths(j, problems);
  }
  if (problems.size() == 1) throw FormatError(path + ": " + problems[0]);
  if (!problems.empty()) {  // every one at once, each on its own line naming the file
    std::string message =
        "cannot load this model (" + std::to_string(problems.size()) + " problems):";
    for (const std::string& p : problems) message += "\n    " + path + ": " + p;
    throw FormatError(path + ": " + message);
  }
  return c;
}

namespace {

// The HF tensor, converted to trident's layout [out, in] with the vocabulary padded.
std::vector<float> global_tensor(const SafetensorsFile& file, const TensorEntry& entry,
                                 const ParamSpec& spec, bool transposed) {
  std::vector<float> src = file.read_float(entry);
  std::vector<long> expected = spec.global_shape;
  bool is_vocab = spec.name == "embedding.word_embeddings.weight";
  if (transposed) std::swap(expected[0], expected[1]);
  std::vector<long> got = entry.shape;
  bool ok = got.size() == expected.size();
  for (size_t d = 0; ok && d < got.size(); ++d)
    ok = (is_vocab && d == 0) ? got[0] <= expected[0] : got[d] == expected[d];
  if (!ok) {
    auto str = [](const std::vector<long>& s) {
      std::string r = "[";
      for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
      return r + "]";
    };
    throw FormatError(file.path() + ": tensor '" + entry.name + "' has shape " + str(got) +
                      ", the config needs " + str(expected));
  }
  std::vector<float> out(
      (size_t)spec.global_shape[0] * (spec.global_shape.size() == 2 ? spec.global_shape[1] : 1),
      0.f);
  if (transposed) {
    long rows = spec.global_shape[0], cols = spec.global_shape[1];
    for (long r = 0; r < rows; ++r)
      for (long c = 0; c < cols; ++c) out[r * cols + c] = src[c * rows + r];
  } else {
    std::copy(src.begin(), src.end(), out.begin());  // padded vocabulary rows stay zero
  }
  return out;
}

// trident's output layer is the word embedding. HF's GPT2LMHeadModel names it
// lm_head.weight and usually saves it only as wte.weight; a file that carries it must
// carry a copy, bit for bit (in fp32), or the model is not one trident computes.
void check_tied_output_layer(const SafetensorsFile& file, const std::string& prefix) {
  const TensorEntry* head = file.find("lm_head.weight");
  if (!head) head = file.find(prefix + "lm_head.weight");
  const TensorEntry* word = file.find(prefix + "wte.weight");
  if (!head || !word) return;  // a missing wte.weight is reported where it is loaded
  bool tied = head->shape == word->shape;
  if (tied) {
    const std::vector<float> a = file.read_float(*head), b = file.read_float(*word);
    tied = std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  }
  if (!tied)
    throw FormatError(file.path() + ": tensor '" + head->name + "' differs from '" + word->name +
                      "': trident ties the output layer to the word embedding; this model has "
                      "an untied lm_head.weight (Megatron's "
                      "--untie-embeddings-and-output-weights is not supported)");
}

}  // namespace

namespace {
bool is_gpt2_block(const ModelConfig& c) {
  return !c.rms_norm() && !c.rope() && !c.swiglu && !c.group_query_attention && c.tied_output() &&
         c.add_bias_linear() && c.attention_width() == c.hidden_size && !c.qk_layernorm;
}
}  // namespace

void load_hf_weights(const std::string& dir, const ModelConfig& config, Parameters& params) {
  if (is_llama_model(config)) return load_llama_weights(dir, config, params);
  const std::string path = (fs::path(dir) / "model.safetensors").string();
  SafetensorsFile file(path);
  std::string prefix = file.find("wte.weight") ? "" : "transformer.";
  check_tied_output_layer(file, prefix);
  for (const ParamSpec& spec : params.layout().specs()) {
    HfName hf = hf_name_for(spec.name);
    const TensorEntry* entry = file.find(prefix + hf.name);
    if (!entry) throw FormatError(path + ": missing tensor '" + prefix + hf.name + "'");
    std::vector<float> global = global_tensor(file, *entry, spec, hf.transposed);
    float* dst = params.values() + spec.offset;
    for (long i = 0, run; i < spec.numel(); i += run) {  // a shard is runs of the global tensor
      run = spec.contiguous_run(i);
      std::copy_n(global.data() + spec.global_index(i), run, dst + i);
    }
  }
  const ParameterLayout whole(config, {0, 1});
  for (const TensorEntry& t : file.tensors()) {
    std::string n = t.name.substr(t.name.rfind(prefix, 0) == 0 ? prefix.size() : 0);
    bool buffer = n.ends_with(".attn.bias") || n.ends_with(".attn.masked_bias");
    bool known = buffer || n == "lm_head.weight" || t.name == "lm_head.weight";
    if (!known) {
      bool matched = false;  // against the whole model: a pipeline chunk holds only part
      for (const ParamSpec& spec : whole.specs())
        if (hf_name_for(spec.name).name == n) matched = true;
      if (!matched)
        throw FormatError(path + ": unexpected tensor '" + t.name +
                          "' (not part of a GPT-2 model with this config)");
    }
  }
}

void save_hf_model(const std::string& dir, const ModelConfig& config, const Parameters& params,
                   bool gradients, StoredDtype dtype) {
  if (config.moe.enabled() && !is_llama_model(config))
    throw std::invalid_argument(
        "HuggingFace export of MoE models writes Mixtral or Qwen3-MoE, on the Llama block "
        "(RMSNorm, rope with --rotary-percent 1, SwiGLU, --group-query-attention); this "
        "model's options differ");
  if (is_llama_model(config)) return save_llama_model(dir, config, params, gradients, dtype);
  if (!is_gpt2_block(config))
    throw std::invalid_argument(
        "HuggingFace export writes GPT-2 (LayerNorm, learned positions, GeLU, tied, biases) or "
        "Llama (RMSNorm, rope with --rotary-percent 1, SwiGLU) models; "
        "this model mixes the two");
  fs::create_directories(dir);
  nlohmann::ordered_json cfg = {{"architectures", {"GPT2LMHeadModel"}},
                                {"model_type", "gpt2"},
                                {"activation_function", "gelu_new"},
                                {"n_layer", config.num_layers},
                                {"n_embd", config.hidden_size},
                                {"n_head", config.num_attention_heads},
                                {"n_inner", config.ffn()},
                                {"n_positions", config.max_positions()},
                                {"n_ctx", config.max_positions()},
                                {"vocab_size", config.vocab_size},
                                {"layer_norm_epsilon", config.layernorm_epsilon},
                                {"tie_word_embeddings", true},
                                {"torch_dtype", hf_torch_dtype(dtype)}};
  std::vector<std::vector<float>> storage;
  std::vector<TensorToWrite> tensors;
  const float* base = gradients ? params.grads() : params.values();
  for (const ParamSpec& spec : params.layout().specs()) {
    HfName hf = hf_name_for(spec.name);
    const float* src = base + spec.offset;
    std::vector<long> shape = spec.global_shape;
    if (spec.name == "embedding.word_embeddings.weight") shape[0] = config.vocab_size;
    if (hf.transposed) {
      long rows = shape[0], cols = shape[1];
      std::vector<float> t((size_t)rows * cols);
      for (long r = 0; r < rows; ++r)
        for (long c = 0; c < cols; ++c) t[c * rows + r] = src[r * cols + c];
      storage.push_back(std::move(t));
      src = storage.back().data();
      std::swap(shape[0], shape[1]);
    }
    tensors.push_back({hf.name, shape, src, dtype});
  }
  write_safetensors((fs::path(dir) / "model.safetensors").string(), tensors,
                    {{"format", "pt"}, {"producer", "trident"}});
  write_file_atomically((fs::path(dir) / "config.json").string(), cfg.dump(2) + "\n");
}

}  // namespace trident::io
