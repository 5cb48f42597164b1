#include "model/transformer_layer.h"

#include "kernels/elementwise.h"
#include "kernels/layernorm.h"

namespace trident {

TransformerLayer::TransformerLayer(const LayerDims& d, Parameters& p, int i, comm::Communicator& tp,
                                   const kernels::LinearPrecision* precision)
    : dims_(d),
      index_(i),
      attention_precision_(precision && precision->precision == kernels::Precision::kBf16
                               ? kernels::Precision::kBf16
                               : kernels::Precision::kFp32) {
  auto get = [&](const char* leaf) { return p.get(layer_param(i, leaf)); };
  ln1_weight_ = get("input_layernorm.weight");
  ln1_bias_ = get("input_layernorm.bias");
  ln2_weight_ = get("post_attention_layernorm.weight");
  ln2_bias_ = get("post_attention_layernorm.bias");
  int attn_local = d.heads_local * d.head_dim;
  qkv_ = {get("self_attention.linear_qkv.weight"),
          get("self_attention.linear_qkv.bias"),
          d.hidden,
          3 * attn_local,
          &tp,
          precision};
  proj_ = {get("self_attention.linear_proj.weight"),
           get("self_attention.linear_proj.bias"),
           attn_local,
           d.hidden,
           &tp,
           precision};
  fc1_ = {get("mlp.linear_fc1.weight"),
          get("mlp.linear_fc1.bias"),
          d.hidden,
          d.ffn_local,
          &tp,
          precision};
  fc2_ = {get("mlp.linear_fc2.weight"),
          get("mlp.linear_fc2.bias"),
          d.ffn_local,
          d.hidden,
          &tp,
          precision};
}

kernels::AttentionDropout TransformerLayer::attention_dropout(const LayerCall& call) const {
  if (!call.dropout.training()) return {};
  const kernels::DropoutConfig& c = *call.dropout.config;
  return {c.attention, c.seed, kernels::dropout_site(index_, kernels::DropoutKind::kAttentionProbs),
          call.dropout.first_sample, dims_.head_offset};
}

void TransformerLayer::attention_core(const LayerActivations& a, const LayerCall& call) const {
  kernels::flash_attention_forward(a.qkv, a.attn_out, a.attn_lse,
                                   {call.batch, call.seq, dims_.heads_local, dims_.head_dim},
                                   attention_dropout(call), attention_precision_);
}

void TransformerLayer::forward(const float* x, const LayerActivations& a, const LayerScratch& w,
                               const LayerCall& call) const {
  const int rows = call.batch * call.seq, h = dims_.hidden;
  using kernels::DropoutKind, kernels::dropout_site;
  kernels::layernorm_forward(x, ln1_weight_.value, ln1_bias_.value, a.ln1_out, a.ln1_mean,
                             a.ln1_rstd, rows, h, dims_.eps);
  qkv_.forward(a.ln1_out.operand(), a.qkv, rows);
  kernels::add_bias(a.qkv, qkv_.bias.value, rows, qkv_.out_local);
  attention_core(a, call);
  proj_.forward(a.attn_out, w.row_out, rows);
  kernels::bias_dropout_residual_add(x, w.row_out, proj_.bias.value, a.residual1, rows, h,
                                     call.dropout,
                                     dropout_site(index_, DropoutKind::kAttentionOut));

  kernels::layernorm_forward(a.residual1, ln2_weight_.value, ln2_bias_.value, a.ln2_out, a.ln2_mean,
                             a.ln2_rstd, rows, h, dims_.eps);
  fc1_.forward(a.ln2_out.operand(), a.fc1_pre, rows);
  kernels::bias_gelu_forward(a.fc1_pre, fc1_.bias.value, a.fc1_act, rows, dims_.ffn_local);
  fc2_.forward(a.fc1_act.operand(), w.row_out, rows);
  kernels::bias_dropout_residual_add(a.residual1, w.row_out, fc2_.bias.value, a.output, rows, h,
                                     call.dropout, dropout_site(index_, DropoutKind::kMlpOut));
}

void TransformerLayer::backward(const float* x, const LayerActivations& a, float* d_residual,
                                const LayerScratch& w, const LayerCall& call) const {
  const int rows = call.batch * call.seq, h = dims_.hidden;
  using kernels::DropoutKind, kernels::dropout_site;
  // d_residual passes the residual add unchanged; the dropped branch gets it masked.
  fc2_.backward(kernels::dropout_backward(d_residual, w.row_out, rows, h, call.dropout,
                                          dropout_site(index_, DropoutKind::kMlpOut)),
                a.fc1_act.operand(), w.d_ffn, rows);
  fc1_.backward_through_gelu(w.d_ffn, a.fc1_pre, a.ln2_out.operand(), w.d_hidden, rows);
  kernels::layernorm_backward(w.d_hidden, a.residual1, ln2_weight_.value, a.ln2_mean, a.ln2_rstd,
                              d_residual, ln2_weight_.grad, ln2_bias_.grad, rows, h, true);
  if (call.progress) (*call.progress)();

  proj_.backward(kernels::dropout_backward(d_residual, w.row_out, rows, h, call.dropout,
                                           dropout_site(index_, DropoutKind::kAttentionOut)),
                 a.attn_out, w.d_attn, rows);
  kernels::flash_attention_backward(a.qkv, a.attn_out, w.d_attn, a.attn_lse, w.d_qkv,
                                    {call.batch, call.seq, dims_.heads_local, dims_.head_dim},
                                    attention_dropout(call), attention_precision_);
  if (call.progress) (*call.progress)();
  qkv_.backward(w.d_qkv, a.ln1_out.operand(), w.d_hidden, rows);
  kernels::layernorm_backward(w.d_hidden, x, ln1_weight_.value, a.ln1_mean, a.ln1_rstd, d_residual,
                              ln1_weight_.grad, ln1_bias_.grad, rows, h, true);
}

}  // namespace trident
