#include "model/transformer_layer.h"

#include "kernels/elementwise.h"
#include "kernels/layernorm.h"
#include "tensor_parallel/mappings.h"

namespace trident {

TransformerLayer::TransformerLayer(const LayerDims& d, Parameters& p, int i, comm::Communicator& tp,
                                   const kernels::LinearPrecision* precision,
                                   bool sequence_parallel)
    : dims_(d),
      index_(i),
      tp_(&tp),
      sequence_parallel_(sequence_parallel),
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
  for (auto* l : {&qkv_, &fc1_}) l->sequence_parallel = sequence_parallel;
  for (auto* l : {&proj_, &fc2_}) l->sequence_parallel = sequence_parallel;
}

int TransformerLayer::local_rows(const LayerCall& call) const {
  const int rows = call.batch * call.seq;
  return sequence_parallel_ ? rows / tp_->size() : rows;
}

// Forward of g-bar: the LayerNorm output of all rows, for a column-parallel layer.
kernels::GemmOperand TransformerLayer::column_input(const kernels::GemmOperandBuffer& ln_out, int n,
                                                    const LayerScratch& w) const {
  if (!sequence_parallel_) return ln_out.operand();
  tensor_parallel::gather_from_sequence_parallel_region(*tp_, ln_out.operand(), w.gathered,
                                                        (long)n * dims_.hidden);
  return w.gathered.operand();
}

// Forward of g-bar': a row-parallel layer's output (in w.row_out) on this rank's rows,
// reduce-scattered in place into this rank's block of w.row_out.
const float* TransformerLayer::row_output(const LayerScratch& w, int n) const {
  if (!sequence_parallel_) return w.row_out;
  return tensor_parallel::reduce_scatter_to_sequence_parallel_region(*tp_, w.row_out,
                                                                     (long)n * dims_.hidden);
}

// Backward of g-bar': d(row-parallel output) of all rows from d(this rank's output rows),
// through dropout. In w.row_out (d_hidden is free until the column-parallel backward).
const float* TransformerLayer::row_output_grad(const float* d_out, const LayerScratch& w, int n,
                                               const LayerCall& call, std::uint32_t site) const {
  if (!sequence_parallel_)
    return kernels::dropout_backward(d_out, w.row_out, n, dims_.hidden, call.dropout, site);
  const float* d =
      kernels::dropout_backward(d_out, w.d_hidden, n, dims_.hidden, call.dropout, site);
  tensor_parallel::reduce_scatter_to_sequence_parallel_region_backward(*tp_, d, w.row_out,
                                                                       (long)n * dims_.hidden);
  return w.row_out;
}

// Backward of g-bar: this rank's rows of d(LayerNorm output), summed over the group from
// the column-parallel layer's partial dx in d_hidden, in place (this rank's block of it).
const float* TransformerLayer::column_input_grad(const LayerScratch& w, int n) const {
  if (!sequence_parallel_) return w.d_hidden;
  return tensor_parallel::gather_from_sequence_parallel_region_backward(*tp_, w.d_hidden,
                                                                        (long)n * dims_.hidden);
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
  const int rows = call.batch * call.seq, n = local_rows(call), h = dims_.hidden;
  using kernels::DropoutKind, kernels::dropout_site;
  kernels::layernorm_forward(x, ln1_weight_.value, ln1_bias_.value, a.ln1_out, a.ln1_mean,
                             a.ln1_rstd, n, h, dims_.eps);
  qkv_.forward(column_input(a.ln1_out, n, w), a.qkv, rows);
  kernels::add_bias(a.qkv, qkv_.bias.value, rows, qkv_.out_local);
  attention_core(a, call);
  proj_.forward(a.attn_out, w.row_out, rows);
  kernels::bias_dropout_residual_add(x, row_output(w, n), proj_.bias.value, a.residual1, n, h,
                                     call.dropout,
                                     dropout_site(index_, DropoutKind::kAttentionOut));

  kernels::layernorm_forward(a.residual1, ln2_weight_.value, ln2_bias_.value, a.ln2_out, a.ln2_mean,
                             a.ln2_rstd, n, h, dims_.eps);
  fc1_.forward(column_input(a.ln2_out, n, w), a.fc1_pre, rows);
  kernels::bias_gelu_forward(a.fc1_pre, fc1_.bias.value, a.fc1_act, rows, dims_.ffn_local);
  fc2_.forward(a.fc1_act.operand(), w.row_out, rows);
  kernels::bias_dropout_residual_add(a.residual1, row_output(w, n), fc2_.bias.value, a.output, n, h,
                                     call.dropout, dropout_site(index_, DropoutKind::kMlpOut));
}

// With sequence parallelism the column-parallel layers' inputs are all-gathered again
// here rather than kept from forward (as Megatron does), so only 1/t of them is stored.
void TransformerLayer::backward(const float* x, const LayerActivations& a, float* d_residual,
                                const LayerScratch& w, const LayerCall& call) const {
  const int rows = call.batch * call.seq, n = local_rows(call), h = dims_.hidden;
  using kernels::DropoutKind, kernels::dropout_site;
  // d_residual passes the residual add unchanged; the dropped branch gets it masked.
  fc2_.backward(row_output_grad(d_residual, w, n, call, dropout_site(index_, DropoutKind::kMlpOut)),
                a.fc1_act.operand(), w.d_ffn, rows);
  fc1_.backward_through_gelu(w.d_ffn, a.fc1_pre, column_input(a.ln2_out, n, w), w.d_hidden, rows);
  kernels::layernorm_backward(column_input_grad(w, n), a.residual1, ln2_weight_.value, a.ln2_mean,
                              a.ln2_rstd, d_residual, ln2_weight_.grad, ln2_bias_.grad, n, h, true);
  if (call.progress) (*call.progress)();

  proj_.backward(
      row_output_grad(d_residual, w, n, call, dropout_site(index_, DropoutKind::kAttentionOut)),
      a.attn_out, w.d_attn, rows);
  kernels::flash_attention_backward(a.qkv, a.attn_out, w.d_attn, a.attn_lse, w.d_qkv,
                                    {call.batch, call.seq, dims_.heads_local, dims_.head_dim},
                                    attention_dropout(call), attention_precision_);
  if (call.progress) (*call.progress)();
  qkv_.backward(w.d_qkv, column_input(a.ln1_out, n, w), w.d_hidden, rows);
  kernels::layernorm_backward(column_input_grad(w, n), x, ln1_weight_.value, a.ln1_mean, a.ln1_rstd,
                              d_residual, ln1_weight_.grad, ln1_bias_.grad, n, h, true);
}

}  // namespace trident
