#include "model/flops.h"

namespace trident {

double training_flops_per_iteration(const ModelConfig& c, long global_batch, int seq,
                                    int padded_vocab) {
  double B = global_batch, s = seq, l = c.num_layers, h = c.hidden_size;
  // Per layer and token, forward: QKV (3h outputs, h + 2 G d with grouped-query attention)
  // and projection, 8h^2 for GPT-2; the MLP's fc1 (2 ffn rows with SwiGLU) and fc2,
  // 16h^2 for GPT-2's 4h; attention 4sh (s: the keys a query attends, fewer with a sliding
  // window). --kv-channels: q, the attention core and the projection's input are a = heads x d
  // wide instead of h. (--qk-layernorm's per-head norms are elementwise: not counted.)
  const double a = (double)c.attention_width();
  const double qkv_out =
      c.group_query_attention ? a + 2.0 * c.query_groups() * c.head_dim() : 3 * a;
  const double linears = 2 * h * qkv_out + 2 * a * h + 2 * h * c.fc1_rows() + 2.0 * c.ffn() * h;
  const double keys = c.attention_keys(s);
  double per_layer_fwd = B * s * (linears + 4 * keys * a);
  double logits_fwd = 2 * B * s * h * padded_vocab;
  return 3 * (l * per_layer_fwd + logits_fwd);
}

}  // namespace trident
