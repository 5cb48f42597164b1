// The mixture-of-experts shape's rules: Megatron's TransformerConfig checks (and the ones its
// arguments.py makes), each naming its flag, plus trident's own on what it does not do.
#include <algorithm>
#include <cmath>

#include "config/model_config.h"

namespace trident {

namespace {
// How a token chooses its experts: k, the score function, the weights' scaling.
void validate_router(const MoeConfig& m, std::vector<std::string>& errors) {
  if (m.router_topk < 1 || m.router_topk > m.num_experts)
    errors.push_back("--moe-router-topk (" + std::to_string(m.router_topk) +
                     ") must be in [1, --num-experts] (" + std::to_string(m.num_experts) + ")");
  // A softmax over one value is 1 whatever the logit: the router would get no gradient
  // (Megatron's rule, TransformerConfig).
  if (m.router_topk == 1 && !m.router_pre_softmax && m.router_score_function == "softmax")
    errors.push_back(
        "--moe-router-topk 1 needs --moe-router-pre-softmax: a softmax over the one chosen "
        "logit is always 1 and would give the router no gradient");
  if (m.router_score_function == "sigmoid" || m.router_score_function == "sqrtsoftplus")
    errors.push_back("--moe-router-score-function " + m.router_score_function +
                     " is not implemented in trident (softmax only)");
  else if (m.router_score_function != "softmax")
    errors.push_back("--moe-router-score-function must be softmax (got '" +
                     m.router_score_function + "')");
  if (!(m.router_topk_scaling_factor >= 0.f && std::isfinite(m.router_topk_scaling_factor)))
    errors.push_back("--moe-router-topk-scaling-factor must be >= 0 and finite (0: none)");
}

// Dropless, or a capacity per expert and what happens to the tokens beyond it.
void validate_capacity(const MoeConfig& m, std::vector<std::string>& errors) {
  // A negative factor means dropless (Megatron turns it into None); 0 would drop every token.
  if (m.expert_capacity_factor == 0.f || !std::isfinite(m.expert_capacity_factor))
    errors.push_back(
        "--moe-expert-capacity-factor must be > 0 and finite (a negative value: dropless, "
        "the default)");
  if (m.pad_expert_input_to_capacity && m.dropless())
    errors.push_back(
        "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor (the capacity "
        "to pad to)");
  if (m.token_drop_policy != "probs" && m.token_drop_policy != "position")
    errors.push_back("--moe-token-drop-policy must be probs or position (got '" +
                     m.token_drop_policy + "')");
}

// Which layers are MoE, and the widths of the experts.
void validate_layers_and_widths(const ModelConfig& c, int t, std::vector<std::string>& errors) {
  const MoeConfig& m = c.moe;
  if (!m.layer_pattern.empty()) {
    if ((long)m.layer_pattern.size() != c.num_layers)
      errors.push_back("--moe-layer-freq gives " + std::to_string((long)m.layer_pattern.size()) +
                       " layers; --num-layers is " + std::to_string(c.num_layers));
    else if (std::find(m.layer_pattern.begin(), m.layer_pattern.end(), true) ==
             m.layer_pattern.end())
      errors.push_back(
          "--moe-layer-freq makes no layer MoE: give at least one 1, or drop "
          "--num-experts for a dense model");
  }
  if (m.ffn_hidden_size < 0)
    errors.push_back("--moe-ffn-hidden-size must be > 0 (got " + std::to_string(m.ffn_hidden_size) +
                     "; 0: --ffn-hidden-size)");
  else if (t > 0 && c.moe_ffn() % t)
    errors.push_back("each expert's width (--moe-ffn-hidden-size, default --ffn-hidden-size: " +
                     std::to_string(c.moe_ffn()) +
                     ") must be divisible by --tensor-model-parallel-size (" + std::to_string(t) +
                     "), which splits each expert as it splits the dense MLP");
  if (m.shared_expert_intermediate_size < 0)
    errors.push_back("--moe-shared-expert-intermediate-size must be >= 0 (0: no shared expert)");
  else if (t > 0 && m.shared_expert_intermediate_size % t)
    errors.push_back("--moe-shared-expert-intermediate-size (" +
                     std::to_string(m.shared_expert_intermediate_size) +
                     ") must be divisible by --tensor-model-parallel-size (" + std::to_string(t) +
                     ")");
  if (m.shared_expert_gate && m.shared_expert_intermediate_size <= 0)
    errors.push_back("--moe-shared-expert-gate needs --moe-shared-expert-intermediate-size");
}
}  // namespace

void validate_moe_config(const ModelConfig& c, int t, std::vector<std::string>& errors) {
  const MoeConfig& m = c.moe;
  if (m.num_experts < 0)
    errors.push_back("--num-experts must be >= 0 (got " + std::to_string(m.num_experts) +
                     "; 0: no MoE)");
  if (!m.enabled()) return;
  validate_router(m, errors);
  validate_capacity(m, errors);
  validate_layers_and_widths(c, t, errors);
}

}  // namespace trident
