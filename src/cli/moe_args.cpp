#include "cli/moe_args.h"

#include "config/moe_layer_freq.h"
#include "io/hf_moe.h"

namespace trident::cli {

namespace {

constexpr const char* kMoeGroup =
    "Mixture of experts (built: any expert- and tensor-parallel size, fp32, dropless or with "
    "a capacity, shared experts)";

// Adds the group's flags, recording each in `given`: a value (the last occurrence wins), a
// switch, or a list (Megatron's nargs='+').
struct MoeFlagAdder {
  CLI::App& app;
  MoeFlags& f;
  template <class T>
  void value(const char* flag, T& field, const char* help) const {
    f.given[flag] = app.add_option(flag, field, help)
                        ->capture_default_str()
                        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
                        ->group(kMoeGroup);
  }
  void flag(const char* name, bool& field, const char* help) const {
    f.given[name] = app.add_flag(name, field, help)->group(kMoeGroup);
  }
  template <class T>
  void list(const char* flag, std::vector<T>& field, const char* help) const {
    f.given[flag] = app.add_option(flag, field, help)->capture_default_str()->group(kMoeGroup);
  }
};

// The shape of the MoE layers: experts, router, which layers, widths, capacity.
void add_shape_flags(const MoeFlagAdder& a, MoeConfig& m, std::string& layer_freq) {
  auto add = [&](const char* flag, auto& field, const char* help) { a.value(flag, field, help); };
  auto flag = [&](const char* name, bool& field, const char* help) { a.flag(name, field, help); };
  add("--num-experts", m.num_experts,
      "experts per MoE layer (0: none). Built at any --expert-model-parallel-size, "
      "--tensor-model-parallel-size (t > 1 with --sequence-parallel), p and d in fp32, "
      "dropless or with a capacity; the rest is refused by name (exit 2)");
  add("--moe-router-topk", m.router_topk, "k: experts each token is routed to");
  add("--moe-layer-freq", layer_freq,
      "N: layer i is MoE iff i % N == 0; or a list expression of 0/1 per layer, e.g. "
      "\"([1]*3+[0]*1)*3\" or \"[1,0,1,0]\"");
  add("--moe-ffn-hidden-size", m.ffn_hidden_size, "each expert's width (0: --ffn-hidden-size)");
  flag("--moe-router-pre-softmax", m.router_pre_softmax,
       "softmax over all experts before top-k, weights not renormalised (HF's "
       "norm_topk_prob false); default: top-k of the logits, softmax over the k");
  add("--moe-router-score-function", m.router_score_function, "softmax (the only one)");
  add("--moe-router-topk-scaling-factor", m.router_topk_scaling_factor,
      "multiplies the k routing weights (0: none)");
  add("--moe-shared-expert-intermediate-size", m.shared_expert_intermediate_size,
      "total width of the shared experts every token passes through (0: none)");
  flag("--moe-shared-expert-gate", m.shared_expert_gate,
       "a sigmoid gate on the shared experts' output (Qwen2-MoE's)");
  add("--moe-expert-capacity-factor", m.expert_capacity_factor,
      "tokens per expert at most ceil(tokens x k / experts x this); negative: dropless");
  flag("--moe-pad-expert-input-to-capacity", m.pad_expert_input_to_capacity,
       "pad every expert's input to its capacity (needs --moe-expert-capacity-factor)");
  add("--moe-token-drop-policy", m.token_drop_policy,
      "beyond capacity, drop the lowest-probability tokens (probs) or the last (position)");
}

// Expert parallelism, the dispatcher, the load-balancing loss and the logging.
void add_training_side_flags(const MoeFlagAdder& a, train::TrainingConfig& c) {
  auto add = [&](const char* flag, auto& field, const char* help) { a.value(flag, field, help); };
  auto flag = [&](const char* name, bool& field, const char* help) { a.flag(name, field, help); };
  add("--expert-model-parallel-size", c.expert_model_parallel_size,
      "EP: the experts split over EP of each stage's t x d ranks (dividing t x d / ETP)");
  add("--expert-tensor-parallel-size", c.expert_tensor_parallel_size,
      "ETP: the experts' tensor-parallel size (0: t; t or 1, whole experts and each tensor "
      "rank routing its own sequence-parallel tokens)");
  add("--moe-token-dispatcher-type", c.moe_token_dispatcher_type,
      "alltoall (Megatron's allgather and flex are not implemented)");
  // Lists, as Megatron's: one coefficient per load-balancing type.
  a.list("--moe-router-load-balancing-type", c.moe_router_load_balancing_type,
         "aux_loss (Switch/GShard, per micro-batch, as Megatron) or none");
  a.list("--moe-aux-loss-coeff", c.moe_aux_loss_coeff,
         "the load-balancing loss's coefficient (Megatron's default 0; 1e-2 is the usual "
         "value)");
  add("--moe-z-loss-coeff", c.moe_z_loss_coeff, "the router z-loss's coefficient (0: none)");
  add("--moe-input-jitter-eps", c.moe_input_jitter_eps, "not implemented (0 only)");
  flag("--moe-grouped-gemm", c.moe_grouped_gemm,
       "accepted for Megatron's scripts: trident's experts always run as one grouped GEMM");
  flag("--moe-per-layer-logging", c.moe_per_layer_logging,
       "log the load-balancing loss of every MoE layer, not only their mean");
}

}  // namespace

MoeFlags add_moe_flags(CLI::App& app, train::TrainingConfig& c) {
  MoeFlags f;
  const MoeFlagAdder adder{app, f};
  add_shape_flags(adder, c.model.moe, c.moe_layer_freq);
  add_training_side_flags(adder, c);
  return f;
}

namespace {

// Each MoE flag's config.json field, in Mixtral's and in Qwen3-MoE's words.
struct HfMoeFields {
  const char *experts, *width, *pre_softmax, *pattern;
};
HfMoeFields hf_moe_fields(bool mixtral) {
  if (mixtral)
    return {"num_local_experts", "intermediate_size",
            "MixtralForCausalLM's router (it always renormalises the top-k weights)",
            "MixtralForCausalLM's layers (all MoE)"};
  return {"num_experts", "moe_intermediate_size", "norm_topk_prob (true)",
          "mlp_only_layers and decoder_sparse_step"};
}

std::string pattern_text(const std::vector<bool>& pattern, int layers) {
  std::string out = "[";
  for (int l = 0; l < layers; ++l)
    out += std::string(l ? "," : "") + (pattern.empty() || pattern[l] ? "1" : "0");
  return out + "]";
}

}  // namespace

void apply_hf_moe_config(const MoeFlags& flags, const ModelConfig& hf, train::TrainingConfig& c,
                         std::vector<std::string>& errors) {
  const std::string config = c.load_hf + "/config.json";
  const io::HfMoeTraining training = io::read_hf_moe_training(c.load_hf);
  const HfMoeFields field = hf_moe_fields(training.mixtral);
  MoeConfig& m = c.model.moe;
  auto given = [&](const char* flag) { return flags.given.at(flag)->count() > 0; };
  auto disagrees = [&](const char* flag, const std::string& ours, const std::string& what) {
    errors.push_back(std::string(flag) + " (" + ours + ") disagrees with " + config + "'s " + what);
  };
  if (!hf.moe.enabled()) {
    if (given("--num-experts") && m.num_experts > 0)
      disagrees("--num-experts", std::to_string(m.num_experts), "model, which has no experts");
    return;
  }
  auto check = [&](const char* flag, int ours, int theirs, const char* name) {
    if (given(flag) && ours != theirs)
      disagrees(flag, std::to_string(ours),
                std::string(name) + " (" + std::to_string(theirs) + ")");
  };
  check("--num-experts", m.num_experts, hf.moe.num_experts, field.experts);
  check("--moe-router-topk", m.router_topk, hf.moe.router_topk, "num_experts_per_tok");
  check("--moe-ffn-hidden-size", c.model.moe_ffn(), hf.moe_ffn(), field.width);
  if (given("--moe-router-pre-softmax") && m.router_pre_softmax && !hf.moe.router_pre_softmax)
    disagrees("--moe-router-pre-softmax", "given", field.pre_softmax);
  if (given("--moe-layer-freq")) {
    try {
      const std::vector<bool> ours = resolve_moe_layer_freq(c.moe_layer_freq, hf.num_layers);
      const std::string a = pattern_text(ours, hf.num_layers);
      const std::string b = pattern_text(hf.moe.layer_pattern, hf.num_layers);
      if (a != b) disagrees("--moe-layer-freq", a, std::string(field.pattern) + " (" + b + ")");
    } catch (const std::invalid_argument& e) {
      errors.push_back(e.what());
    }
  }
  m.num_experts = hf.moe.num_experts, m.router_topk = hf.moe.router_topk;
  m.ffn_hidden_size = hf.moe.ffn_hidden_size, m.router_pre_softmax = hf.moe.router_pre_softmax;
  m.layer_pattern = hf.moe.layer_pattern;
  const bool aux_loss = c.moe_router_load_balancing_type == std::vector<std::string>{"aux_loss"};
  if (!given("--moe-aux-loss-coeff") && aux_loss)
    c.moe_aux_loss_coeff = {(float)training.router_aux_loss_coef};
  if (training.router_jitter_noise > 0)
    errors.push_back(config + "'s router_jitter_noise (" +
                     std::to_string(training.router_jitter_noise) +
                     ") is not implemented for training (Megatron's --moe-input-jitter-eps); "
                     "score, generate, eval and serve ignore it, as HF's inference does");
}

MoeFlags add_moe_shape_flags(CLI::App& app, MoeConfig& m, std::string& layer_freq) {
  MoeFlags f;
  add_shape_flags(MoeFlagAdder{app, f}, m, layer_freq);
  return f;
}

void apply_moe_shape_flags(const MoeFlags& flags, ModelConfig& m, const std::string& layer_freq,
                           bool pattern_from_hf, std::vector<std::string>& errors) {
  if (!m.moe.enabled()) {
    // --expert-model-parallel-size is the rules' (Megatron's own check, without flags).
    for (const auto& [name, option] : flags.given)
      if (option->count() > 0 && name != "--num-experts" && name != "--expert-model-parallel-size")
        errors.push_back(name + " needs --num-experts (there is no MoE layer for it to shape)");
    return;
  }
  if (m.num_layers <= 0) return;  // --num-layers's own rule reports it
  if (pattern_from_hf) return;    // the pattern is config.json's (apply_hf_moe_config)
  try {
    m.moe.layer_pattern = resolve_moe_layer_freq(layer_freq, m.num_layers);
  } catch (const std::invalid_argument& e) {
    errors.push_back(e.what());
  }
}

void apply_moe_flags(const MoeFlags& flags, train::TrainingConfig& c,
                     std::vector<std::string>& errors) {
  apply_moe_shape_flags(flags, c.model, c.moe_layer_freq, !c.load_hf.empty(), errors);
}

}  // namespace trident::cli
