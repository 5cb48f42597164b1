// TransformerLayer's forward for generation: the step's new tokens against the KV cache.
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/layernorm.h"
#include "model/transformer_layer.h"

namespace trident {

namespace {

template <class Linear>
Linear with_precision(Linear l, const kernels::LinearPrecision* p) {
  l.precision = p;
  return l;
}

}  // namespace

void TransformerLayer::forward_cached(const float* x, float* out, const kernels::KvLayerView& kv,
                                      const CachedLayerBuffers& w, const CachedCall& call) const {
  const int rows = call.rows, h = dims_.hidden, heads = dims_.heads_local, hd = dims_.head_dim;
  const long attn_local = (long)heads * hd;
  kernels::layernorm_forward(x, ln1_weight_.value, ln1_bias_.value, w.ln_out, w.mean, w.rstd, rows,
                             h, dims_.eps);
  with_precision(qkv_, call.precision).forward(w.ln_out.operand(), w.qkv, rows);
  kernels::add_bias(w.qkv, qkv_.bias.value, rows, qkv_.out_local);
  kernels::kv_cache_append(w.qkv, kv, call.segments, call.n_segments);
  // A slot's whole prompt at once is plain causal attention over it: flash attention's
  // blocked kernel. Everything else (decode rows, continued prompts) reads the cache.
  std::vector<kernels::CachedSegment> cached;
  for (int s = 0; s < call.n_segments; ++s) {
    const kernels::CachedSegment& seg = call.segments[s];
    if (seg.start == 0 && seg.count > 1)
      kernels::flash_attention_forward(w.qkv + seg.row * 3 * attn_local,
                                       w.attn_out + seg.row * attn_local, w.lse,
                                       {1, seg.count, heads, hd}, {}, attention_precision_);
    else
      cached.push_back(seg);
  }
  kernels::cached_attention(w.qkv, w.attn_out, kv, cached.data(), (int)cached.size());
  with_precision(proj_, call.precision).forward(w.attn_out, w.row_out, rows);
  kernels::bias_residual_add(x, w.row_out, proj_.bias.value, w.residual, rows, h);

  kernels::layernorm_forward(w.residual, ln2_weight_.value, ln2_bias_.value, w.ln_out, w.mean,
                             w.rstd, rows, h, dims_.eps);
  with_precision(fc1_, call.precision).forward(w.ln_out.operand(), w.fc1_pre, rows);
  kernels::bias_gelu_forward(w.fc1_pre, fc1_.bias.value, w.fc1_act, rows, dims_.ffn_local);
  with_precision(fc2_, call.precision).forward(w.fc1_act.operand(), w.row_out, rows);
  kernels::bias_residual_add(w.residual, w.row_out, fc2_.bias.value, out, rows, h);
}

}  // namespace trident
