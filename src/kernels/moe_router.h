#pragma once
// The mixture-of-experts router after its logits (x Wr^T): which k experts each token goes
// to and with what weights, Megatron-Core's two softmax conventions
// (moe_utils.topk_routing_with_score_function), their backward, and the two router losses,
// Switch/GShard's load-balancing loss (switch_load_balancing_loss_func) and the z-loss
// (z_loss_func), with their gradients into the logits. Everything is fp32 with the softmax
// taken from the row maximum, as Megatron computes the routing scores.
//
// Ties between logits are broken towards the lower expert index (so a routing is a
// function of the logits alone); the choice of k is locally constant, which is what the
// gradients assume.

namespace trident::kernels {

struct RouterShape {
  int tokens = 0;   // rows of logits on this rank
  int experts = 0;  // E
  int topk = 0;     // k <= E
  // false (Megatron's default): top-k of the logits, then a softmax over those k, i.e. a
  // softmax over E, top-k and the k weights renormalised to sum to 1 (Mixtral; Qwen3-MoE's
  // norm_topk_prob true). true (--moe-router-pre-softmax): softmax over E, then top-k, the
  // k probabilities kept as they are (Qwen3-MoE's norm_topk_prob false).
  bool pre_softmax = false;
  float scaling_factor = 0.f;  // multiplies the k weights; 0: none
};

// logits [tokens, E] ->
//   probs [tokens, E]: the softmax over all E (the aux loss's scores, pre-softmax's weights),
//   lse [tokens]: each row's log-sum-exp (the z-loss's),
//   idx [tokens, k]: the chosen experts, highest logit first,
//   weights [tokens, k]: their routing weights.
void moe_router_forward(const RouterShape& s, const float* logits, float* probs, float* lse,
                        int* idx, float* weights);

// d_weights [tokens, k] -> d_logits [tokens, E] (overwritten): through the softmax over the
// k chosen logits (pre_softmax false) or over all E (true); zero for logits that neither
// chose nor, without pre-softmax, entered the softmax.
void moe_router_backward(const RouterShape& s, const float* probs, const int* idx,
                         const float* weights, const float* d_weights, float* d_logits);

// counts[e] = (token, slot) pairs of these rows routed to expert e, as floats (exact below
// 2^24 per expert), ready to be summed over the tensor-parallel group.
void count_tokens_per_expert(const int* idx, int tokens, int topk, int experts, float* counts);

// Megatron's aux-loss factor, coeff * E / (k * T^2), with T the micro-batch's tokens over
// the whole tensor-parallel group (rows on this rank x t).
double aux_loss_scale(double coeff, int experts, int topk, double total_tokens);

// aux = scale * sum_e counts[e] * sum_x probs[x, e] over these rows; counts are the whole
// micro-batch's (a constant: the gradient flows through probs only).
double moe_aux_loss(const float* probs, const float* counts, int tokens, int experts, double scale);
// d_logits [tokens, E] += d(grad * aux)/d(logits), through the softmax over E.
void moe_aux_loss_backward(const float* probs, const float* counts, int tokens, int experts,
                           double scale_times_grad, float* d_logits);

// z = scale * sum_x lse[x]^2, where Megatron's scale is coeff / (t * tokens on this rank).
double moe_z_loss(const float* lse, int tokens, double scale);
// d_logits [tokens, E] += d(grad * z)/d(logits) = grad * scale * 2 lse[x] probs[x, e].
void moe_z_loss_backward(const float* probs, const float* lse, int tokens, int experts,
                         double scale_times_grad, float* d_logits);

// Token dropping (--moe-expert-capacity-factor, Megatron's topk_softmax_with_capacity; the
// padding is make_moe_permutation's). An expert's capacity is ceil(tokens * k / E * factor)
// (get_capacity);
// keep[t * k + j] says whether token t's j-th choice fits its expert: under "probs" each
// expert keeps the `capacity` of its tokens with the highest weights, under "position" its
// first `capacity` tokens; equal weights go to the lower token.
int moe_expert_capacity(int tokens, int topk, int experts, double capacity_factor);
enum class DropPolicy { kProbs, kPosition };
void moe_capacity_keep(const int* idx, const float* weights, int tokens, int topk, int experts,
                       int capacity, DropPolicy policy, unsigned char* keep);

}  // namespace trident::kernels
