#include "model/transformer_layer.h"

#include <algorithm>
#include <stdexcept>

#include "context_parallel/attention.h"
#include "kernels/elementwise.h"
#include "kernels/head_rmsnorm.h"
#include "kernels/layernorm.h"
#include "kernels/swiglu.h"
#include "kernels/weight_grad_store.h"
#include "tensor_parallel/mappings.h"

namespace trident {

namespace {
// RoPE as the model's options define it, Llama 3.x scaling included.
kernels::RopeConfig rope_config(const ModelConfig& c) {
  kernels::RopeConfig r{c.head_dim(), c.rotary_dim(), c.rotary_base};
  if (!c.use_rope_scaling) return r;
  using Type = kernels::RopeScaling::Type;
  r.scaling.type = c.rope_scaling_type == "linear" ? Type::kLinear : Type::kLlama3;
  r.scaling.factor = c.rope_scaling_factor;
  r.scaling.low_freq_factor = c.rope_low_freq_factor;
  r.scaling.high_freq_factor = c.rope_high_freq_factor;
  r.scaling.original_max_positions = c.rope_original_max_positions;
  return r;
}
}  // namespace

LayerDims layer_dims(const ModelConfig& c, int rank, int t) {
  const int heads_local = c.num_attention_heads / t;
  LayerDims d{c.hidden_size, heads_local,         c.head_dim(),
              c.ffn() / t,   c.layernorm_epsilon, rank * heads_local};
  d.rms_norm = c.rms_norm();
  d.swiglu = c.swiglu;
  if (c.rope()) d.rope = rope_config(c);
  d.window = c.window_size;
  d.grouped = c.group_query_attention;
  if (d.grouped) {
    const int g = c.query_groups(), per_group = c.num_attention_heads / g;
    // G >= t: this rank's G / t groups, its heads' own. G < t: every group, replicated; this
    // rank's heads all read group head_offset / per_group.
    const int held = g % t == 0 ? g / t : g;
    d.groups = {heads_local, held, per_group, g % t == 0 ? 0 : d.head_offset / per_group,
                c.head_dim()};
    d.kv_local = 2 * held * c.head_dim();
  }
  d.qk_norm = c.qk_layernorm;
  if (c.lora.enabled()) d.lora_rank = c.lora.rank, d.lora_scale = c.lora.scale();
  if (c.moe.enabled()) d.moe = moe_dims(c, 0.0, 0.0, t);  // the loss coefficients: the chunk's
  return d;
}

Norm make_norm(Parameters& p, const std::string& prefix, const ModelConfig& c) {
  Norm n;
  n.rms = c.rms_norm();
  n.eps = c.layernorm_epsilon;
  n.weight = p.get(prefix + ".weight");
  if (!n.rms) n.bias = p.get(prefix + ".bias");
  return n;
}

TransformerLayer::TransformerLayer(const LayerDims& d, Parameters& p, int i, comm::Communicator& tp,
                                   const kernels::LinearPrecision* precision,
                                   bool sequence_parallel, comm::Communicator* expert,
                                   Parameters* experts, Parameters* adapters)
    : dims_(d),
      index_(i),
      tp_(&tp),
      sequence_parallel_(sequence_parallel),
      attention_precision_(precision && precision->precision == kernels::Precision::kBf16
                               ? kernels::Precision::kBf16
                               : kernels::Precision::kFp32),
      precision_(precision) {
  auto get = [&](const std::string& leaf) { return p.get(layer_param(i, leaf)); };
  // A linear's bias, or an empty one under --disable-bias-linear.
  auto bias = [&](const std::string& linear) {
    const std::string name = layer_param(i, linear + ".bias");
    return p.layout().contains(name) ? p.get(name) : ParamRef{nullptr, nullptr, 0};
  };
  auto norm = [&](const std::string& prefix) {
    Norm n;
    n.rms = d.rms_norm, n.eps = d.eps;
    n.weight = get(prefix + ".weight");
    if (!n.rms) n.bias = get(prefix + ".bias");
    return n;
  };
  auto column = [&](const std::string& name, int out_local) {
    return tensor_parallel::ColumnParallelLinear{
        get(name + ".weight"), bias(name), d.hidden, out_local, &tp, precision};
  };
  ln1_ = norm("input_layernorm");
  ln2_ = norm("post_attention_layernorm");
  if (d.qk_norm) {
    q_norm_ = get("self_attention.q_layernorm.weight");
    k_norm_ = get("self_attention.k_layernorm.weight");
  }
  const int attn_local = d.heads_local * d.head_dim;
  // Null until set: which of qkv_, q_ and kv_ are in use is read from their weights.
  qkv_ = {}, q_ = {}, kv_ = {};
  if (d.grouped) {
    q_ = column("self_attention.linear_q", attn_local);
    kv_ = column("self_attention.linear_kv", d.kv_local);
    // Without biases linear_kv's shard follows linear_q's in the parameter buffers (values,
    // gradients, 16-bit copies alike): one GEMM of h + 2 G d rows (this rank's share) then
    // forms q, k and v, as Megatron's fused linear_qkv does. qkv_ holds that view.
    const long q_floats = (long)attn_local * d.hidden;
    const bool adjacent = kv_.weight.value == q_.weight.value + q_floats &&
                          (!q_.weight.grad || kv_.weight.grad == q_.weight.grad + q_floats) &&
                          (!q_.weight.low || kv_.weight.low == q_.weight.low + q_floats);
    if (!q_.bias.numel && adjacent) {
      ParamRef both = q_.weight;
      both.numel = q_.weight.numel + kv_.weight.numel, both.panels = nullptr;
      qkv_ = {both,     ParamRef{nullptr, nullptr, 0}, d.hidden, attn_local + d.kv_local, &tp,
              precision};
    }
  } else {
    qkv_ = column("self_attention.linear_qkv", 3 * attn_local);
  }
  proj_ = {get("self_attention.linear_proj.weight"),
           bias("self_attention.linear_proj"),
           attn_local,
           d.hidden,
           &tp,
           precision};
  moe_ = p.layout().contains(layer_param(i, "mlp.router.weight"));
  if (moe_) {
    // fp32, bf16 or fp16 (MoeDims::bf16 / fp16, set by the chunk).
    const kernels::Precision run = precision ? precision->precision : kernels::Precision::kFp32;
    if ((run == kernels::Precision::kBf16) != d.moe.bf16 ||
        (run == kernels::Precision::kFp16) != d.moe.fp16)
      throw std::logic_error(layer_param(i, "mlp") + ": MoE precision differs from the layer's");
    moe_mlp_ = MoeMlp(d.moe, p, experts ? *experts : p, i, expert);
    // ETP = t: each expert split over the tensor group; ETP = 1 < t: whole experts, the
    // tensor group splitting the rows instead.
    if (d.moe.token_parallel > 1)
      moe_mlp_.set_token_group(&tp);
    else
      moe_mlp_.set_tensor_group(&tp);
    fc1_ = {}, fc2_ = {};
  } else {
    fc1_ = column("mlp.linear_fc1", d.swiglu ? 2 * d.ffn_local : d.ffn_local);
    fc2_ = {get("mlp.linear_fc2.weight"),
            bias("mlp.linear_fc2"),
            d.ffn_local,
            d.hidden,
            &tp,
            precision};
  }
  for (auto* l : {&qkv_, &q_, &kv_, &fc1_}) l->sequence_parallel = sequence_parallel;
  for (auto* l : {&proj_, &fc2_}) l->sequence_parallel = sequence_parallel;
  if (adapters && adapters->size() > 0) attach_lora(*adapters);
}

std::vector<ParamRef> TransformerLayer::product_weights() const {
  std::vector<ParamRef> weights;
  // qkv_ set: the fused GEMM (q_ and kv_ then only name its parts); fc1_ and fc2_ unset in
  // MoE layers, whose experts' products are grouped.
  const bool fused = qkv_.weight.value != nullptr;
  for (const ParamRef* w :
       {&qkv_.weight, &q_.weight, &kv_.weight, &proj_.weight, &fc1_.weight, &fc2_.weight})
    if (w->value && !(fused && (w == &q_.weight || w == &kv_.weight))) weights.push_back(*w);
  return weights;
}

void TransformerLayer::attach_lora(Parameters& p) {
  using tensor_parallel::LoraBranch;
  // module: its place in lora_modules() (its dropout site); in_local: the columns of the
  // input this rank holds, of the unsplit in_local * split (a row-parallel linear's split).
  auto branch = [&](const std::string& linear, const std::string& b_of, int module, long in_local,
                    int split) {
    const std::string a = lora_param(index_, linear, "A");
    if (!p.layout().contains(a)) return LoraBranch{};
    const long first_col = split > 1 ? in_local * tp_->rank() : 0;
    return LoraBranch{p.get(a),
                      p.get(lora_param(index_, b_of, "B")),
                      dims_.lora_rank,
                      dims_.lora_scale,
                      {kernels::lora_dropout_site(index_, module), first_col, in_local * split}};
  };
  const long attn_local = (long)dims_.heads_local * dims_.head_dim;
  const int t = tp_->size();
  if (!dims_.grouped) {
    qkv_.lora =
        branch("self_attention.linear_qkv", "self_attention.linear_qkv", 0, dims_.hidden, 1);
  } else if (LoraBranch qkv =
                 branch("self_attention.linear_qkv", "self_attention.linear_q", 0, dims_.hidden, 1);
             qkv.active()) {
    // The fused q|kv GEMM's B: linear_q's rows, then linear_kv's, adjacent in the buffer.
    const ParamRef kv = p.get(lora_param(index_, "self_attention.linear_kv", "B"));
    const bool adjacent =
        kv.value == qkv.b.value + qkv.b.numel && (!kv.grad || kv.grad == qkv.b.grad + qkv.b.numel);
    if (!qkv_.weight.value || !adjacent)
      throw std::invalid_argument(
          "--lora-target-modules linear_qkv with grouped-query attention needs the fused q|kv "
          "projection (no q/k/v biases) and heads x head_dim / t x --lora-rank a multiple of 16");
    qkv.b.numel += kv.numel;
    qkv_.lora = qkv;
  }
  proj_.lora = branch("self_attention.linear_proj", "self_attention.linear_proj", 1, attn_local, t);
  if (moe_) return;
  fc1_.lora = branch("mlp.linear_fc1", "mlp.linear_fc1", 2, dims_.hidden, 1);
  fc2_.lora = branch("mlp.linear_fc2", "mlp.linear_fc2", 3, dims_.ffn_local, t);
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

kernels::QkvLayout TransformerLayer::qkv_layout(int rows) const {
  const int hd = dims_.head_dim;
  if (!dims_.grouped) return kernels::QkvLayout::packed(dims_.heads_local, hd);
  const kernels::QueryGroups& g = dims_.groups;
  const long q = (long)dims_.heads_local * hd, k = (long)g.groups * hd;
  kernels::QkvLayout l;
  l.kv_heads = g.groups, l.heads_per_kv = g.heads_per_group, l.first_kv = g.first_group;
  if (qkv_.weight.value) {  // the fused GEMM's rows of [q | k | v]
    l.q_stride = l.kv_stride = q + dims_.kv_local;
    l.k_offset = q, l.v_offset = q + k;
  } else {  // q's rows, then kv's
    l.q_stride = q, l.kv_stride = dims_.kv_local;
    l.k_offset = rows * q, l.v_offset = rows * q + k;
  }
  return l;
}

std::shared_ptr<const kernels::RopeTable> TransformerLayer::rope_table(int seq) const {
  if (dims_.rope.rotary_dim <= 0) return nullptr;
  return kernels::shared_rope_table(dims_.rope, seq);
}

kernels::AttentionShape TransformerLayer::attention_shape(const LayerCall& call) const {
  kernels::AttentionShape s{call.batch, call.seq, dims_.heads_local, dims_.head_dim, dims_.window};
  s.doc_start = call.doc_start, s.positions = call.positions;
  return s;
}

// Context parallelism: RoPE's table covers the whole sequence, of which seq is this rank's.
int TransformerLayer::sequence_positions(const LayerCall& call) const {
  return call.context ? call.seq * call.context->size : call.seq;
}

void TransformerLayer::attention_core(const LayerActivations& a, const LayerCall& call) const {
  const auto rope = rope_table(sequence_positions(call));
  const kernels::QkvLayout layout = qkv_layout(call.batch * call.seq);
  if (call.context && call.context->active())
    return context_parallel::attention_forward(a.qkv, layout, a.attn_out, a.attn_lse,
                                               attention_shape(call), attention_dropout(call),
                                               attention_precision_, rope.get(), *call.context);
  kernels::flash_attention_forward(a.qkv, layout, a.attn_out, a.attn_lse, attention_shape(call),
                                   attention_dropout(call), attention_precision_, rope.get());
}

void TransformerLayer::attention_core_backward(const LayerActivations& a, const LayerScratch& w,
                                               const LayerCall& call) const {
  const auto rope = rope_table(sequence_positions(call));
  const kernels::QkvLayout layout = qkv_layout(call.batch * call.seq);
  if (call.context && call.context->active())
    return context_parallel::attention_backward(
        a.qkv, layout, a.attn_out, w.d_attn, a.attn_lse, w.d_qkv, attention_shape(call),
        attention_dropout(call), attention_precision_, rope.get(), *call.context);
  kernels::flash_attention_backward(a.qkv, layout, a.attn_out, w.d_attn, a.attn_lse, w.d_qkv,
                                    attention_shape(call), attention_dropout(call),
                                    attention_precision_, rope.get());
}

void TransformerLayer::project_qkv(kernels::GemmOperand in, float* qkv, int rows,
                                   const tensor_parallel::LoraCall& lora) const {
  if (qkv_.weight.value) {  // linear_qkv, or the fused q|kv GEMM
    qkv_.forward(in, qkv, rows, lora);
    kernels::add_bias(qkv, qkv_.bias.value, rows, qkv_.out_local);
    return;
  }
  float* kv = qkv + (long)rows * q_.out_local;
  q_.forward(in, qkv, rows);
  kernels::add_bias(qkv, q_.bias.value, rows, q_.out_local);
  kv_.forward(in, kv, rows);
  kernels::add_bias(kv, kv_.bias.value, rows, kv_.out_local);
}

long TransformerLayer::qkv_width() const {
  const long q = (long)dims_.heads_local * dims_.head_dim;
  return dims_.grouped ? q + dims_.kv_local : 3 * q;
}

// The q heads, then the k heads (every key / value head the rank holds), each by its own
// weight; v passes unchanged.
void TransformerLayer::qk_norm_forward(const float* pre, float* qkv, float* rstd, int rows) const {
  if (pre != qkv) std::copy_n(pre, (long)rows * qkv_width(), qkv);
  const kernels::QkvLayout l = qkv_layout(rows);
  const kernels::HeadRows q{rows, l.q_stride, dims_.heads_local, dims_.head_dim};
  const kernels::HeadRows k{rows, l.kv_stride, l.kv_heads, dims_.head_dim};
  kernels::head_rmsnorm_forward(pre, qkv, q, q_norm_.value, dims_.eps, rstd);
  kernels::head_rmsnorm_forward(pre + l.k_offset, qkv + l.k_offset, k, k_norm_.value, dims_.eps,
                                rstd ? rstd + (long)rows * q.heads : nullptr);
}

void TransformerLayer::qk_norm_backward(const float* pre, const float* rstd, float* d_qkv,
                                        int rows) const {
  const kernels::QkvLayout l = qkv_layout(rows);
  const kernels::HeadRows q{rows, l.q_stride, dims_.heads_local, dims_.head_dim};
  const kernels::HeadRows k{rows, l.kv_stride, l.kv_heads, dims_.head_dim};
  kernels::head_rmsnorm_backward(d_qkv, pre, q, q_norm_.value, rstd, q_norm_.grad);
  kernels::head_rmsnorm_backward(d_qkv + l.k_offset, pre + l.k_offset, k, k_norm_.value,
                                 rstd + (long)rows * q.heads, k_norm_.grad);
}

void TransformerLayer::mlp_activation(float* fc1_pre, const kernels::GemmOperandBuffer& act,
                                      int rows) const {
  if (dims_.swiglu)
    kernels::bias_swiglu_forward(fc1_pre, fc1_.bias.value, act, rows, dims_.ffn_local);
  else
    kernels::bias_gelu_forward(fc1_pre, fc1_.bias.value, act, rows, dims_.ffn_local);
}

void TransformerLayer::forward(const float* x, const LayerActivations& a, const LayerScratch& w,
                               const LayerCall& call) const {
  const int rows = call.batch * call.seq, n = local_rows(call), h = dims_.hidden;
  using kernels::DropoutKind, kernels::dropout_site;
  ln1_.forward(x, a.ln1_out, a.ln1_mean, a.ln1_rstd, n, h);
  if (dims_.qk_norm) {  // the projections write the norm's input, kept for its backward
    project_qkv(column_input(a.ln1_out, n, w), a.qkv_pre, rows, lora_call(call, w));
    qk_norm_forward(a.qkv_pre, a.qkv, a.qk_rstd, rows);
  } else {
    project_qkv(column_input(a.ln1_out, n, w), a.qkv, rows, lora_call(call, w));
  }
  // Between the big products, communication in flight moves (the next unit's gather).
  if (call.progress) (*call.progress)();
  attention_core(a, call);
  if (call.progress) (*call.progress)();
  proj_.forward(a.attn_out, w.row_out, rows, lora_call(call, w));
  kernels::bias_dropout_residual_add(x, row_output(w, n), proj_.bias.value, a.residual1, n, h,
                                     call.dropout,
                                     dropout_site(index_, DropoutKind::kAttentionOut));

  ln2_.forward(a.residual1, a.ln2_out, a.ln2_mean, a.ln2_rstd, n, h);
  if (moe_) {
    moe_forward(a, w, call, n);
  } else {
    fc1_.forward(column_input(a.ln2_out, n, w), a.fc1_pre, rows, lora_call(call, w));
    if (call.progress) (*call.progress)();
    mlp_activation(a.fc1_pre, a.fc1_act, rows);
    fc2_.forward(a.fc1_act.operand(), w.row_out, rows, lora_call(call, w));
  }
  kernels::bias_dropout_residual_add(a.residual1, mlp_output(w, n), fc2_.bias.value, a.output, n, h,
                                     call.dropout, dropout_site(index_, DropoutKind::kMlpOut));
}

const float* TransformerLayer::mlp_output(const LayerScratch& w, int n) const {
  return moe_routes_own_rows() ? w.row_out : row_output(w, n);
}

const float* TransformerLayer::mlp_output_grad(const float* d_out, const LayerScratch& w, int n,
                                               const LayerCall& call) const {
  const std::uint32_t site = kernels::dropout_site(index_, kernels::DropoutKind::kMlpOut);
  if (!moe_routes_own_rows()) return row_output_grad(d_out, w, n, call, site);
  return kernels::dropout_backward(d_out, w.row_out, n, dims_.hidden, call.dropout, site);
}

const float* TransformerLayer::mlp_input_grad(const LayerScratch& w, int n) const {
  return moe_routes_own_rows() ? w.d_hidden : column_input_grad(w, n);
}

// The MoE MLP sees every row of the micro-batch, as the column-parallel fc1 does (all-gathered
// with sequence parallelism), and leaves its partial sum over the tensor group in w.row_out
// for row_output's reduce-scatter; without sequence parallelism at t > 1 (which training
// refuses, train/moe_rules.cpp) it is all-reduced here, as the row-parallel fc2 does (g).
// With whole experts (ETP = 1 < t) it routes this rank's n rows and its output is theirs.
void TransformerLayer::moe_forward(const LayerActivations& a, const LayerScratch& w,
                                   const LayerCall& call, int n) const {
  const bool own = moe_routes_own_rows();
  const int rows = own ? n : call.batch * call.seq;
  const kernels::GemmOperand x = own ? a.ln2_out.operand() : column_input(a.ln2_out, n, w);
  const MoeLosses losses = moe_mlp_.forward(x, rows, a.moe, w.moe, w.row_out);
  // At ETP = t every tensor rank routes all rows alike: the stats are each rank's, not partial
  // sums. At ETP = 1 < t the loads are this rank's rows' (summed over the tensor group when
  // the step's stats are collected) and the losses the micro-batch's.
  const MoeDims& d = moe_mlp_.dims();
  if (call.moe_stats)
    add_moe_stats((*call.moe_stats)[index_], losses, a.moe.idx, rows, d.topk, d.experts);
  if (!sequence_parallel_ && tp_->size() > 1)
    tensor_parallel::reduce_from_region_forward(*tp_, w.row_out, (long)rows * dims_.hidden);
}

// d_out: d(MoE output) of every row (all-gathered with sequence parallelism). The MoE input
// is gathered again, as for the dense fc1's backward; the partial dx it leaves in w.d_hidden
// is summed over the tensor group by column_input_grad's reduce-scatter, or all-reduced
// here without sequence parallelism (f's backward).
void TransformerLayer::moe_backward(const float* d_out, const LayerActivations& a,
                                    const LayerScratch& w, const LayerCall& call, int n) const {
  const bool own = moe_routes_own_rows();
  const int rows = own ? n : call.batch * call.seq;
  const kernels::GemmOperand x = own ? a.ln2_out.operand() : column_input(a.ln2_out, n, w);
  moe_mlp_.backward(x, rows, a.moe, w.moe, d_out, call.moe_loss_grad, w.d_hidden);
  if (!sequence_parallel_ && tp_->size() > 1)
    tensor_parallel::copy_to_region_backward(*tp_, w.d_hidden, (long)rows * dims_.hidden);
}

void TransformerLayer::donate(float* region, long floats) const {
  if (precision_ && precision_->deferred && precision_->deferred->recording())
    precision_->deferred->donate(region, floats);
}

// The fused projection (linear_qkv, or grouped-query attention's q|kv GEMM) in one product;
// linear_q and linear_kv apart (biases) with one reduction of their summed d(input).
void TransformerLayer::backward_qkv(kernels::GemmOperand in, const LayerScratch& w, int rows,
                                    const tensor_parallel::LoraCall& lora) const {
  if (qkv_.weight.value) {
    qkv_.backward(w.d_qkv, in, w.d_hidden, rows, lora);
    return;
  }
  q_.backward_partial(w.d_qkv, in, w.d_hidden, rows);
  kv_.backward_partial(w.d_qkv + (long)rows * q_.out_local, in, w.row_out,
                       rows);  // row_out is free
  kernels::accumulate(w.d_hidden, w.row_out, (long)rows * dims_.hidden);
  if (!sequence_parallel_)
    tensor_parallel::copy_to_region_backward(*tp_, w.d_hidden, (long)rows * dims_.hidden);
}

void TransformerLayer::dense_mlp_backward(const float* d_out, const LayerActivations& a,
                                          const LayerScratch& w, int rows, int n,
                                          const tensor_parallel::LoraCall& lora) const {
  fc2_.backward(d_out, a.fc1_act.operand(), w.d_ffn, rows, lora);
  // fc1's pre-activation is dead once its gradient is formed: a deferred W finds fc1's
  // output gradient there (in place with SwiGLU in fp32, else copied as the product takes it).
  donate(a.fc1_pre, (long)rows * fc1_.out_local);
  if (dims_.swiglu) {
    // fc1's pre-activation is not needed after this (fp32: it becomes its own gradient).
    fc1_.backward_through_swiglu(w.d_ffn, a.fc1_pre, column_input(a.ln2_out, n, w), w.d_hidden,
                                 rows, lora);
  } else {
    fc1_.backward_through_gelu(w.d_ffn, a.fc1_pre, column_input(a.ln2_out, n, w), w.d_hidden, rows,
                               lora);
  }
  donate(nullptr, 0);
}

// With sequence parallelism the column-parallel layers' inputs are all-gathered again
// here rather than kept from forward (as Megatron does), so only 1/t of them is stored.
void TransformerLayer::backward(const float* x, const LayerActivations& a, float* d_residual,
                                const LayerScratch& w, const LayerCall& call) const {
  const int rows = call.batch * call.seq, n = local_rows(call), h = dims_.hidden;
  using kernels::DropoutKind, kernels::dropout_site;
  // Zero-bubble B: the output gradients of the layer's linears are kept until W in its
  // buffers that B has passed (the store takes those of the held activations that fit).
  // The layer's output is the next layer's input, passed already.
  donate(a.output, (long)n * h);
  // d_residual passes the residual add unchanged; the dropped branch gets it masked.
  const float* d_mlp_out = mlp_output_grad(d_residual, w, n, call);
  if (moe_)
    moe_backward(d_mlp_out, a, w, call, n);
  else
    dense_mlp_backward(d_mlp_out, a, w, rows, n, lora_call(call, w));
  ln2_.backward(mlp_input_grad(w, n), a.residual1, a.ln2_mean, a.ln2_rstd, d_residual, n, h, true);
  if (call.progress) (*call.progress)();

  donate(a.residual1, (long)n * h);  // read last by ln2's backward
  proj_.backward(
      row_output_grad(d_residual, w, n, call, dropout_site(index_, DropoutKind::kAttentionOut)),
      a.attn_out, w.d_attn, rows, lora_call(call, w));
  donate(nullptr, 0);
  attention_core_backward(a, w, call);
  if (dims_.qk_norm) qk_norm_backward(a.qkv_pre, a.qk_rstd, w.d_qkv, rows);
  if (call.progress) (*call.progress)();
  // q, k and v are dead after the attention backward: a deferred W finds their projections'
  // output gradients in that buffer.
  const long q_local = (long)dims_.heads_local * dims_.head_dim;
  donate(a.qkv, (long)rows * (dims_.grouped ? q_local + dims_.kv_local : 3 * q_local));
  backward_qkv(column_input(a.ln1_out, n, w), w, rows, lora_call(call, w));
  donate(nullptr, 0);
  ln1_.backward(column_input_grad(w, n), x, a.ln1_mean, a.ln1_rstd, d_residual, n, h, true);
}

}  // namespace trident
