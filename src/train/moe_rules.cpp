#include "train/moe_rules.h"

#include <cmath>

#include "config/moe_config.h"
#include "io/hf_moe.h"
#include "train/training_config.h"

namespace trident::train {

namespace {

std::string num(long v) {
  return std::to_string(v);
}

// ETP = 1 < t: whole experts, each tensor rank routing its own tokens. What that layout
// does not build, by name.
void check_whole_experts(const TrainingConfig& c, std::vector<std::string>& errors) {
  const int ep = c.expert_model_parallel_size, t = c.tensor_model_parallel_size;
  const std::string prefix =
      "--expert-tensor-parallel-size 1 with --tensor-model-parallel-size " + num(t) + ": ";
  // Each expert's expert-data group then stays on one tensor rank, whose checkpoint file
  // holds the expert whole (checkpoint/save.cpp).
  if (ep % t)
    errors.push_back(prefix + "--expert-model-parallel-size (" + num(ep) +
                     ") must be a multiple of t (other expert grids are not built)");
  if (c.model.moe.shared_expert_intermediate_size > 0)
    errors.push_back(prefix +
                     "--moe-shared-expert-intermediate-size is not built (shared "
                     "experts run over the tensor group at ETP = t only)");
  if (!c.save_hf.empty())
    errors.push_back(prefix + "--save-hf is not built (export gathers tensor-split experts)");
  if (!c.sample_prompt.empty())
    errors.push_back(prefix +
                     "--sample-prompt is not built (generation runs tensor-split "
                     "experts)");
}

// EP and ETP: the experts' grid inside the dense one (Megatron's parallel_state): each
// stage's t x d ranks regrouped as ETP x EP x EDP.
void check_expert_layout(const TrainingConfig& c, std::vector<std::string>& errors) {
  const int ep = c.expert_model_parallel_size, t = c.tensor_model_parallel_size;
  const int d = c.data_parallel_size(), experts = c.model.moe.num_experts;
  if (ep < 1) {
    errors.push_back("--expert-model-parallel-size must be >= 1 (got " + num(ep) + ")");
    return;
  }
  if (ep > 1 && experts > 0 && experts % ep)
    errors.push_back("--num-experts (" + num(experts) +
                     ") must be divisible by --expert-model-parallel-size (" + num(ep) + ")");
  const int etp = c.expert_tensor_parallel();
  if (c.expert_tensor_parallel_size < 0) {
    errors.push_back(
        "--expert-tensor-parallel-size must be >= 1 (default: "
        "--tensor-model-parallel-size)");
    return;
  }
  if (t % etp) {
    errors.push_back("--expert-tensor-parallel-size (" + num(etp) +
                     ") must divide --tensor-model-parallel-size (" + num(t) +
                     "): the expert grid regroups each stage's t x d ranks as ETP x EP x EDP");
    return;
  }
  if (etp != 1 && etp != t)
    errors.push_back("--expert-tensor-parallel-size " + num(etp) +
                     " is not built: trident takes 1 (whole experts) or "
                     "--tensor-model-parallel-size (" +
                     num(t) + ")");
  // Megatron's expert RankGenerator: world = ETP x EP x EDP x p, i.e. EP divides t x d / ETP
  // (at ETP = t: EP divides d).
  const long stage = (long)t * d / etp;
  if (ep > 1 && d > 0 && stage % ep && etp == t)
    errors.push_back("--expert-model-parallel-size (" + num(ep) +
                     ") must divide the data-parallel size (" + num(d) + " = world size " +
                     num(c.world_size) +
                     " / (t x p)): expert-parallel ranks are taken from "
                     "the data-parallel group");
  else if (ep > 1 && d > 0 && stage % ep)
    errors.push_back("--expert-model-parallel-size (" + num(ep) + ") must divide t x d / ETP (" +
                     num(t) + " x " + num(d) + " / " + num(etp) + " = " + num(stage) +
                     "; d = world size " + num(c.world_size) +
                     " / (t x p)): the expert grid regroups each stage's t x d ranks as "
                     "ETP x EP x EDP");
  if (etp < t) check_whole_experts(c, errors);
  // Megatron's MoELayer.forward raises the same in training ("performance may degrade if
  // MoE and tensor parallelism are enabled without also enabling sequence parallelism").
  if (t > 1 && !c.sequence_parallel)
    errors.push_back("--num-experts with --tensor-model-parallel-size " + num(t) +
                     " needs --sequence-parallel (Megatron's rule: MoE layers with tensor "
                     "parallelism train only with sequence parallelism)");
}

// The token dispatcher and the load-balancing type: trident's choices, others by name.
void check_dispatch_and_balancing(const TrainingConfig& c, std::vector<std::string>& errors) {
  const std::string& dispatcher = c.moe_token_dispatcher_type;
  if (dispatcher == "allgather" || dispatcher == "flex")
    errors.push_back("--moe-token-dispatcher-type " + dispatcher +
                     " is not implemented in trident: alltoall only (its default)");
  else if (dispatcher != "alltoall")
    errors.push_back("--moe-token-dispatcher-type must be alltoall (got '" + dispatcher + "')");
  const std::vector<std::string>& types = c.moe_router_load_balancing_type;
  for (const std::string& type : types) {
    if (type == "seq_aux_loss" || type == "global_aux_loss" || type == "sinkhorn" ||
        type == "quantile_balancing")
      errors.push_back("--moe-router-load-balancing-type " + type +
                       " is not implemented in trident (aux_loss or none)");
    else if (type != "aux_loss" && type != "none")
      errors.push_back("--moe-router-load-balancing-type must be aux_loss or none (got '" + type +
                       "')");
  }
  if (types.size() > 1)
    errors.push_back("--moe-router-load-balancing-type: give one type (aux_loss or none), got " +
                     num((long)types.size()));
}

// The aux- and z-loss coefficients; jitter, which trident does not implement.
void check_coefficients(const TrainingConfig& c, std::vector<std::string>& errors) {
  const std::vector<float>& coeffs = c.moe_aux_loss_coeff;
  const size_t types = c.moe_router_load_balancing_type.size();
  if (coeffs.size() != 1 && coeffs.size() != types)
    errors.push_back(
        "--moe-aux-loss-coeff: give one coefficient, or one per "
        "--moe-router-load-balancing-type (" +
        num((long)types) + "), got " + num((long)coeffs.size()));
  bool any_positive = false;
  for (float coeff : coeffs) {
    if (!(coeff >= 0.f && std::isfinite(coeff)))
      errors.push_back("--moe-aux-loss-coeff must be >= 0 and finite");
    any_positive = any_positive || coeff > 0.f;
  }
  const bool aux_loss = types == 1 && c.moe_router_load_balancing_type[0] == "aux_loss";
  if (any_positive && types == 1 && !aux_loss)
    errors.push_back(
        "--moe-aux-loss-coeff > 0 needs --moe-router-load-balancing-type aux_loss "
        "(got " +
        c.moe_router_load_balancing_type[0] + ")");
  if (!(c.moe_z_loss_coeff >= 0.f && std::isfinite(c.moe_z_loss_coeff)))
    errors.push_back("--moe-z-loss-coeff must be >= 0 and finite (0: no z-loss)");
  if (c.moe_input_jitter_eps != 0.f)
    errors.push_back("--moe-input-jitter-eps is not implemented in trident");
}

}  // namespace

void check_moe(const TrainingConfig& c, std::vector<std::string>& errors) {
  if (!c.model.moe.enabled()) {
    // Megatron's rule; the other MoE flags given without experts are the command line's to
    // refuse (cli/moe_args.h), which knows what was given.
    if (c.expert_model_parallel_size > 1)
      errors.push_back("--expert-model-parallel-size " + num(c.expert_model_parallel_size) +
                       " needs --num-experts (no MoE layer to split)");
    return;
  }
  check_expert_layout(c, errors);
  check_dispatch_and_balancing(c, errors);
  check_coefficients(c, errors);
  // Refused before training rather than after it: a pattern HF cannot say (Mixtral with dense
  // layers), and what neither Mixtral nor Qwen3-MoE computes.
  if (!c.save_hf.empty())
    for (const std::string& why : io::moe_export_problems(c.model))
      errors.push_back("--save-hf (as " +
                       std::string(io::is_qwen3_moe_model(c.model) ? "Qwen3MoeForCausalLM"
                                                                   : "MixtralForCausalLM") +
                       "): " + why);
}

}  // namespace trident::train
