#include "cli/moe_args.h"

#include "config/moe_layer_freq.h"

namespace trident::cli {

namespace {

constexpr const char* kGroup =
    "Mixture of experts (built: expert- and tensor-parallel size 1, fp32, dropless)";

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
                        ->group(kGroup);
  }
  void flag(const char* name, bool& field, const char* help) const {
    f.given[name] = app.add_flag(name, field, help)->group(kGroup);
  }
  template <class T>
  void list(const char* flag, std::vector<T>& field, const char* help) const {
    f.given[flag] = app.add_option(flag, field, help)->capture_default_str()->group(kGroup);
  }
};

// The shape of the MoE layers: experts, router, which layers, widths, capacity.
void add_shape_flags(const MoeFlagAdder& a, MoeConfig& m, std::string& layer_freq) {
  auto add = [&](const char* flag, auto& field, const char* help) { a.value(flag, field, help); };
  auto flag = [&](const char* name, bool& field, const char* help) { a.flag(name, field, help); };
  add("--num-experts", m.num_experts,
      "experts per MoE layer (0: none). Built at --expert-model-parallel-size 1 and "
      "--tensor-model-parallel-size 1 (any p and d) in fp32, dropless; the rest is refused "
      "by name (exit 2)");
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
      "EP: the experts split over EP ranks of the data-parallel group (must divide it)");
  add("--expert-tensor-parallel-size", c.expert_tensor_parallel_size,
      "the experts' tensor-parallel size (0: t; only t is supported)");
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

void apply_moe_flags(const MoeFlags& flags, train::TrainingConfig& c,
                     std::vector<std::string>& errors) {
  if (!c.model.moe.enabled()) {
    // --expert-model-parallel-size is the rules' (Megatron's own check, without flags).
    for (const auto& [name, option] : flags.given)
      if (option->count() > 0 && name != "--num-experts" && name != "--expert-model-parallel-size")
        errors.push_back(name + " needs --num-experts (there is no MoE layer for it to shape)");
    return;
  }
  if (c.model.num_layers <= 0) return;  // --num-layers's own rule reports it
  try {
    c.model.moe.layer_pattern = resolve_moe_layer_freq(c.moe_layer_freq, c.model.num_layers);
  } catch (const std::invalid_argument& e) {
    errors.push_back(e.what());
  }
}

}  // namespace trident::cli
