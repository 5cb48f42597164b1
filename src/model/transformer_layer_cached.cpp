// TransformerLayer's forward for generation: the step's new tokens against the KV cache.
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/layernorm.h"
#include "model/transformer_layer.h"

namespace trident {

// RoPE turns each new row's q and k by its own position (start of its segment + offset)
// before its k joins the cache, so cached keys are stored rotated (training rotates them as
// attention loads them; the same values).
void TransformerLayer::forward_cached(const float* x, float* out, const kernels::KvLayerView& kv,
                                      const CachedLayerBuffers& w, const CachedCall& call) const {
  const int rows = call.rows, h = dims_.hidden, heads = dims_.heads_local, hd = dims_.head_dim;
  const long attn_local = (long)heads * hd;
  ln1_.forward(x, w.ln_out, w.mean, w.rstd, rows, h);
  TransformerLayer with = *this;  // the step's precision on copies of the linears
  for (auto* l : {&with.qkv_, &with.q_, &with.kv_, &with.fc1_}) l->precision = call.precision;
  for (auto* l : {&with.proj_, &with.fc2_}) l->precision = call.precision;
  // q, k, v as the projections write them (grouped-query attention: the groups' k and v
  // once, not per head); the cache holds the key / value heads this rank's heads read.
  with.project_qkv(w.ln_out.operand(), w.qkv, rows);
  if (dims_.qk_norm) qk_norm_forward(w.qkv, w.qkv, nullptr, rows);  // before RoPE, as training
  const kernels::QkvLayout l = qkv_layout(rows);
  const int kv_read = (heads - 1) / l.heads_per_kv + 1;
  if (dims_.rope.rotary_dim > 0) {
    std::vector<int> positions(rows);
    int longest = 1;
    for (int s = 0; s < call.n_segments; ++s) {
      const kernels::CachedSegment& seg = call.segments[s];
      for (int i = 0; i < seg.count; ++i) positions[seg.row + i] = seg.start + i;
      longest = std::max(longest, seg.start + seg.count);
    }
    const kernels::RopeTable table(dims_.rope, longest);
    kernels::rope_apply(w.qkv, rows, l.q_stride, heads, positions.data(), table, dims_.rope, false);
    kernels::rope_apply(w.qkv + l.k_offset + (long)l.first_kv * hd, rows, l.kv_stride, kv_read,
                        positions.data(), table, dims_.rope, false);
  }
  kernels::kv_cache_append(w.qkv, l, kv, call.segments, call.n_segments);
  // A slot's whole prompt at once is plain causal attention over it: flash attention's
  // blocked kernel. Everything else (decode rows, continued prompts) reads the cache.
  std::vector<kernels::CachedSegment> cached;
  for (int s = 0; s < call.n_segments; ++s) {
    const kernels::CachedSegment& seg = call.segments[s];
    if (seg.start == 0 && seg.count > 1) {
      // The segment's rows as a batch of one: q from row seg.row on, k and v likewise.
      kernels::QkvLayout from = l;
      from.k_offset += seg.row * (l.kv_stride - l.q_stride);
      from.v_offset += seg.row * (l.kv_stride - l.q_stride);
      kernels::flash_attention_forward(
          w.qkv + seg.row * l.q_stride, from, w.attn_out + seg.row * attn_local, w.lse,
          {1, seg.count, heads, hd, dims_.window}, {}, attention_precision_, nullptr);
    } else {
      cached.push_back(seg);
    }
  }
  kernels::cached_attention(w.qkv, l, heads, w.attn_out, kv, cached.data(), (int)cached.size(),
                            dims_.window);
  with.proj_.forward(w.attn_out, w.row_out, rows);
  kernels::bias_residual_add(x, w.row_out, proj_.bias.value, w.residual, rows, h);

  ln2_.forward(w.residual, w.ln_out, w.mean, w.rstd, rows, h);
  if (moe_) {  // the new rows routed to their top-k experts, as training routes them (fp32)
    moe_mlp_.forward_inference(w.ln_out.operand(), rows, w.row_out);
    kernels::bias_residual_add(w.residual, w.row_out, nullptr, out, rows, h);
    return;
  }
  with.fc1_.forward(w.ln_out.operand(), w.fc1_pre, rows);
  mlp_activation(w.fc1_pre, w.fc1_act, rows);
  with.fc2_.forward(w.fc1_act.operand(), w.row_out, rows);
  kernels::bias_residual_add(w.residual, w.row_out, fc2_.bias.value, out, rows, h);
}

}  // namespace trident
