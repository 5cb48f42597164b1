#include "model/flops.h"

namespace trident {

double layer_forward_flops_per_token(const ModelConfig& c, int layer, int seq) {
  const double s = seq, h = c.hidden_size;
  // Per layer and token, forward: QKV (3h outputs, h + 2 G d with grouped-query attention)
  // and projection, 8h^2 for GPT-2; the MLP's fc1 (2 ffn rows with SwiGLU) and fc2,
  // 16h^2 for GPT-2's 4h; attention 4sh (s: the keys a query attends, fewer with a sliding
  // window). --kv-channels: q, the attention core and the projection's input are a = heads x d
  // wide instead of h. (--qk-layernorm's per-head norms are elementwise: not counted.)
  const double a = (double)c.attention_width();
  const double qkv_out =
      c.group_query_attention ? a + 2.0 * c.query_groups() * c.head_dim() : 3 * a;
  const double attention = 2 * h * qkv_out + 2 * a * h + 4 * c.attention_keys(s) * a;
  if (!c.is_moe_layer(layer)) return attention + 2 * h * c.fc1_rows() + 2.0 * c.ffn() * h;
  // An MoE layer: each token's k experts (Megatron's moe_layer_flops) and the router's
  // 2 h E, which Megatron leaves out as small; FLOPs of the active parameters only.
  const double f = c.moe_ffn(), moe_fc1 = c.swiglu ? 2 * f : f;
  // Shared experts (width S) run on every token, with their gate's 2 h.
  const double shared = c.moe.shared_expert_intermediate_size;
  const double shared_mlp = shared > 0 ? 2 * h * (c.swiglu ? 2 * shared : shared) + 2 * shared * h +
                                             (c.moe.shared_expert_gate ? 2 * h : 0)
                                       : 0;
  return attention + c.moe.router_topk * (2 * h * moe_fc1 + 2 * f * h) + 2 * h * c.moe.num_experts +
         shared_mlp;
}

double logits_forward_flops_per_token(const ModelConfig& c, int padded_vocab) {
  return 2.0 * c.hidden_size * padded_vocab;
}

double training_flops_per_iteration(const ModelConfig& c, long global_batch, int seq,
                                    int padded_vocab) {
  double per_token = logits_forward_flops_per_token(c, padded_vocab);
  for (int layer = 0; layer < c.num_layers; ++layer)
    per_token += layer_forward_flops_per_token(c, layer, seq);
  return 3 * (double)global_batch * seq * per_token;
}

}  // namespace trident
