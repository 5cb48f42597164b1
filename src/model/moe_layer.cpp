#include "model/moe_layer.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "expert_parallel/dispatcher.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/grouped_gemm.h"
#include "kernels/moe_permute.h"
#include "kernels/swiglu.h"

namespace trident {

MoeDims moe_dims(const ModelConfig& c, double aux_loss_coeff, double z_loss_coeff, int t,
                 int expert_tensor_parallel, bool sequence_parallel) {
  const int tensor_parallel = expert_tensor_parallel > 0 ? expert_tensor_parallel : t;
  // config/moe_config.cpp refuses a width t does not divide.
  MoeDims d;
  // ETP < t splits the micro-batch's rows, not the experts, over the t / ETP tensor ranks
  // (sequence parallelism in training; generation runs at ETP = t).
  d.token_parallel = sequence_parallel ? t / tensor_parallel : 1;
  d.hidden = c.hidden_size;
  d.experts = c.moe.num_experts;
  d.topk = c.moe.router_topk;
  d.ffn = c.moe_ffn() / tensor_parallel;
  d.tensor_parallel = tensor_parallel;
  d.swiglu = c.swiglu;
  d.pre_softmax = c.moe.router_pre_softmax;
  d.scaling_factor = c.moe.router_topk_scaling_factor;
  d.aux_loss_coeff = aux_loss_coeff;
  d.z_loss_coeff = z_loss_coeff;
  d.capacity_factor = c.moe.dropless() ? -1.0 : (double)c.moe.expert_capacity_factor;
  d.pad_to_capacity = c.moe.pad_expert_input_to_capacity;
  d.drop_policy = c.moe.token_drop_policy == "position" ? kernels::DropPolicy::kPosition
                                                        : kernels::DropPolicy::kProbs;
  // config/moe_config.cpp refuses a shared width t does not divide.
  d.shared_ffn = c.moe.shared_expert_intermediate_size / tensor_parallel;
  d.shared_gate = c.moe.shared_expert_gate;
  return d;
}

long MoeDims::capacity(long tokens) const {
  return kernels::moe_expert_capacity((int)tokens, topk, experts, capacity_factor);
}

long MoeDims::permuted_rows(long tokens) const {
  return pad_to_capacity ? experts * capacity(tokens) : tokens * topk;
}

long MoeDims::expert_rows(long tokens) const {
  // Every source rank sends each of this rank's E/EP experts at most `capacity` rows
  // (exactly that when padded).
  const long capped = dropless() ? 0 : (long)expert_parallel * local_experts() * capacity(tokens);
  if (pad_to_capacity) return capped;
  const long dropless_rows =
      expert_parallel::max_received_rows(tokens, topk, experts, expert_parallel);
  return dropless() ? dropless_rows : std::min(dropless_rows, capped);
}

std::vector<long> moe_activation_parts(const MoeDims& d, long tokens) {
  static_assert(sizeof(int) == sizeof(float), "idx takes floats' places");
  const long s = tokens * d.topk, r = d.expert_rows(tokens);
  const long gated = d.shared_ffn > 0 && d.shared_gate ? tokens : 0;
  return {tokens * d.experts,
          tokens,
          s,
          s,
          r * d.hidden,
          r * d.fc1_rows(),
          r * d.ffn,
          r,
          d.experts,
          tokens * d.shared_fc1_rows(),
          tokens * d.shared_ffn,
          gated,
          gated * d.hidden};
}

std::vector<long> moe_scratch_parts(const MoeDims& d, long tokens) {
  const long s = tokens * d.topk, r = d.expert_rows(tokens), sent = d.permuted_rows(tokens);
  const bool ep = d.expert_parallel > 1, shared = d.shared_ffn > 0;
  // bf16 operands, two to a float; none in fp32. fp16 operands rounded, in fp32.
  auto bf16_floats = [&](long n) { return d.bf16 ? (n + 1) / 2 : 0L; };
  auto fp16_floats = [&](long n) { return d.fp16 ? n : 0L; };
  const long in = std::max(r * std::max(d.hidden, d.ffn),
                           shared ? tokens * std::max(d.hidden, d.shared_ffn) : 0L);
  const long out = std::max(r * std::max(d.hidden, d.fc1_rows()),
                            shared ? tokens * std::max(d.hidden, d.shared_fc1_rows()) : 0L);
  const long weight =
      std::max((long)d.fc1_rows() * d.hidden, shared ? (long)d.shared_fc1_rows() * d.hidden : 0L);
  return {tokens * d.experts,
          d.experts,
          sent,
          r,
          s,
          r * d.ffn,
          r * d.ffn,
          r * d.hidden,
          ep ? sent * d.hidden : 0,
          ep ? r * d.hidden : 0,
          d.shared_ffn > 0 ? tokens * d.hidden : 0,
          tokens * d.shared_ffn,
          d.bf16 ? tokens * d.hidden : 0,
          bf16_floats(in),
          bf16_floats(out),
          fp16_floats(in),
          fp16_floats(out),
          fp16_floats(weight)};
}

MoeMlp::MoeMlp(const MoeDims& d, Parameters& p, Parameters& experts, int layer,
               comm::Communicator* expert)
    : dims_(d), expert_(expert) {
  const int ranks = expert ? expert->size() : 1;
  if (ranks != d.expert_parallel || d.experts % ranks)
    throw std::invalid_argument(layer_param(layer, "mlp") + ": " + std::to_string(d.experts) +
                                " experts over an expert group of " + std::to_string(ranks) +
                                " (planned for " + std::to_string(d.expert_parallel) + ")");
  first_local_ = (expert ? expert->rank() : 0) * d.local_experts();
  router_ = p.get(layer_param(layer, "mlp.router.weight"));
  if (d.shared_ffn > 0) {
    shared_fc1_ = p.get(layer_param(layer, "mlp.shared_experts.linear_fc1.weight"));
    shared_fc2_ = p.get(layer_param(layer, "mlp.shared_experts.linear_fc2.weight"));
    if (d.shared_gate) shared_gate_ = p.get(layer_param(layer, "mlp.shared_experts.gate_weight"));
    if ((d.bf16 || d.fp16) && (!shared_fc1_.low || !shared_fc2_.low))
      throw std::invalid_argument(layer_param(layer, "mlp.shared_experts") +
                                  ": a bf16 or fp16 MoE layer needs the 16-bit weight copy");
  }
  fc1_.assign(d.experts, nullptr), fc2_.assign(d.experts, nullptr);
  fc1_grad_.assign(d.experts, nullptr), fc2_grad_.assign(d.experts, nullptr);
  fc1_low_.assign(d.experts, nullptr), fc2_low_.assign(d.experts, nullptr);
  for (int e = 0; e < d.experts; ++e) {
    const std::string fc1_name = moe_expert_param(layer, e, "linear_fc1.weight");
    const bool mine = e >= first_local_ && e < first_local_ + d.local_experts();
    if (!experts.layout().contains(fc1_name)) {
      if (mine) throw std::invalid_argument(fc1_name + ": this rank's expert, not in its buffer");
      continue;  // another expert-parallel rank's
    }
    const ParamRef fc1 = experts.get(fc1_name);
    const ParamRef fc2 = experts.get(moe_expert_param(layer, e, "linear_fc2.weight"));
    fc1_[e] = fc1.value, fc1_grad_[e] = fc1.grad;
    fc2_[e] = fc2.value, fc2_grad_[e] = fc2.grad;
    fc1_low_[e] = fc1.low, fc2_low_[e] = fc2.low;
    if ((d.bf16 || d.fp16) && (!fc1.low || !fc2.low))
      throw std::invalid_argument(fc1_name +
                                  ": a bf16 or fp16 MoE layer needs its experts' 16-bit copy");
  }
}

void MoeMlp::set_tensor_group(comm::Communicator* tensor) {
  const int ranks = tensor ? tensor->size() : 1;
  if (ranks != dims_.tensor_parallel)
    throw std::invalid_argument("MoE layer: a tensor group of " + std::to_string(ranks) +
                                " ranks (planned for " + std::to_string(dims_.tensor_parallel) +
                                ")");
  tensor_ = tensor;
}

void MoeMlp::set_token_group(comm::Communicator* tokens) {
  const int ranks = tokens ? tokens->size() : 1;
  if (ranks != dims_.token_parallel)
    throw std::invalid_argument("MoE layer: a token group of " + std::to_string(ranks) +
                                " ranks (planned for " + std::to_string(dims_.token_parallel) +
                                ")");
  tokens_ = tokens;
}

kernels::RouterShape MoeMlp::router_shape(int tokens) const {
  return {tokens, dims_.experts, dims_.topk, dims_.pre_softmax, dims_.scaling_factor};
}

// Megatron's z-loss scale: coeff / tokens, the mean over all the micro-batch's rows (every
// tensor rank routes them all at ETP = t; each its 1/t at ETP < t).
double MoeMlp::z_scale(int tokens) const {
  return dims_.z_loss_coeff / ((double)tokens * dims_.token_parallel);
}

double MoeMlp::aux_scale(int tokens) const {
  const MoeDims& d = dims_;
  return kernels::aux_loss_scale(d.aux_loss_coeff, d.experts, d.topk,
                                 (double)tokens * d.token_parallel);
}

void MoeMlp::count_all_tokens(const MoeActivations& a, int tokens, const MoeScratch& w) const {
  kernels::count_tokens_per_expert(a.idx, tokens, dims_.topk, dims_.experts, w.counts);
  if (tokens_split()) tokens_->all_reduce(w.counts, dims_.experts, comm::ReduceOp::kSum);
}

const float* MoeMlp::fp32_input(kernels::GemmOperand x, int tokens, const MoeScratch& w) const {
  if (x.fp32) return x.fp32;
  kernels::from_bf16(x.bf16, w.x32, (long)tokens * dims_.hidden);  // exact
  return w.x32;
}

MoeMlp::Linear MoeMlp::expert_linear(const long* offsets, bool fc1) const {
  const MoeDims& d = dims_;
  const int local = d.local_experts();
  if (fc1)
    return {{offsets, local, d.hidden, d.fc1_rows()},
            fc1_.data() + first_local_,
            fc1_low_.data() + first_local_,
            fc1_grad_.data() + first_local_};
  return {{offsets, local, d.ffn, d.hidden},
          fc2_.data() + first_local_,
          fc2_low_.data() + first_local_,
          fc2_grad_.data() + first_local_};
}

// The shared experts as one group of `offsets` = {0, tokens} rows.
MoeMlp::Linear MoeMlp::shared_linear(const long* offsets, bool fc1) const {
  const MoeDims& d = dims_;
  const ParamRef& p = fc1 ? shared_fc1_ : shared_fc2_;
  const kernels::ExpertGroups g =
      fc1 ? kernels::ExpertGroups{offsets, 1, d.hidden, d.shared_fc1_rows()}
          : kernels::ExpertGroups{offsets, 1, d.shared_ffn, d.hidden};
  return {g, &p.value, &p.low, &p.grad};
}

void MoeMlp::linear_forward(const Linear& l, const float* x, const MoeScratch& w, float* y) const {
  const kernels::ExpertGroups& g = l.groups;
  if (dims_.fp16) return fp16_forward(l, x, w, y);
  if (!dims_.bf16) return kernels::grouped_linear_forward(g, x, l.fp32, y);
  kernels::to_bf16(x, w.in16, g.offsets[g.experts] * g.in);
  kernels::grouped_linear_forward(g, w.in16, l.low, y);
}

void MoeMlp::linear_backward(const Linear& l, const float* dy, const float* x, const MoeScratch& w,
                             float* dx, bool accumulate) const {
  const kernels::ExpertGroups& g = l.groups;
  if (dims_.fp16) return fp16_backward(l, dy, x, w, dx, accumulate);
  if (!dims_.bf16) {
    kernels::grouped_linear_backward_weight(g, dy, x, l.grad);
    kernels::grouped_linear_backward_input(g, dy, l.fp32, dx, accumulate);
    return;
  }
  const long rows = g.offsets[g.experts];
  kernels::to_bf16(dy, w.out16, rows * g.out);
  kernels::to_bf16(x, w.in16, rows * g.in);
  kernels::grouped_linear_backward_weight(g, w.out16, w.in16, l.grad);
  kernels::grouped_linear_backward_input(g, w.out16, l.low, dx, accumulate);
}

// Each expert with rows by itself: its weight expanded from the fp16 copy into w.weight32 (one
// weight's scratch), its rows of the operands already rounded through fp16.
void MoeMlp::fp16_forward(const Linear& l, const float* x, const MoeScratch& w, float* y) const {
  const kernels::ExpertGroups& g = l.groups;
  kernels::round_through_fp16(x, w.in32, g.offsets[g.experts] * g.in);
  for (int e = 0; e < g.experts; ++e) {
    const long first = g.offsets[e], offsets[2] = {0, g.offsets[e + 1] - first};
    if (offsets[1] == 0) continue;
    kernels::from_fp16(l.low[e], w.weight32, (long)g.out * g.in);
    const float* weight = w.weight32;
    kernels::grouped_linear_forward({offsets, 1, g.in, g.out}, w.in32 + first * g.in, &weight,
                                    y + first * g.out);
  }
}

void MoeMlp::fp16_backward(const Linear& l, const float* dy, const float* x, const MoeScratch& w,
                           float* dx, bool accumulate) const {
  const kernels::ExpertGroups& g = l.groups;
  const long rows = g.offsets[g.experts];
  kernels::round_through_fp16(dy, w.out32, rows * g.out);
  kernels::round_through_fp16(x, w.in32, rows * g.in);
  kernels::grouped_linear_backward_weight(g, w.out32, w.in32, l.grad);  // fp32 accumulation
  for (int e = 0; e < g.experts; ++e) {
    const long first = g.offsets[e], offsets[2] = {0, g.offsets[e + 1] - first};
    if (offsets[1] == 0) continue;
    kernels::from_fp16(l.low[e], w.weight32, (long)g.out * g.in);
    const float* weight = w.weight32;
    kernels::grouped_linear_backward_input({offsets, 1, g.in, g.out}, w.out32 + first * g.out,
                                           &weight, dx + first * g.in, accumulate);
  }
}

MoeLosses MoeMlp::forward(kernels::GemmOperand input, int tokens, const MoeActivations& a,
                          const MoeScratch& w, float* y) const {
  const MoeDims& d = dims_;
  const float* x = fp32_input(input, tokens, w);
  kernels::linear_forward(x, router_.value, w.logits, tokens, d.hidden, d.experts);
  kernels::moe_router_forward(router_shape(tokens), w.logits, a.probs, a.lse, a.idx, a.weights);
  MoeLosses losses;
  if (d.aux_loss_coeff > 0.0) {
    count_all_tokens(a, tokens, w);
    losses.aux = kernels::moe_aux_loss(a.probs, w.counts, tokens, d.experts, aux_scale(tokens));
  }
  if (d.z_loss_coeff > 0.0) losses.z = kernels::moe_z_loss(a.lse, tokens, z_scale(tokens));
  // ETP < t: each rank's sums over its own rows (with every row's counts) add up to the
  // micro-batch's losses.
  if (tokens_split() && (d.aux_loss_coeff > 0.0 || d.z_loss_coeff > 0.0)) {
    double both[2] = {losses.aux, losses.z};
    tokens_->all_reduce(both, 2, comm::ReduceOp::kSum);
    losses.aux = both[0], losses.z = both[1];
  }

  const kernels::MoePermutation perm = permutation(a, tokens);
  const expert_parallel::DispatchPlan plan = dispatch_plan(perm, a);
  // At EP = 1 the permuted rows are the experts' rows; else they go out and come back.
  const bool ep = dispatches();
  kernels::moe_permute(perm, x, d.hidden, ep ? w.own_rows : a.rows);
  kernels::moe_permute_weights(perm, a.weights, ep ? w.src_weights : a.row_weights);
  if (ep) {
    expert_parallel::dispatch(*expert_, plan, w.own_rows, d.hidden, w.staging, a.rows);
    expert_parallel::dispatch(*expert_, plan, w.src_weights, 1, w.staging, a.row_weights);
  }
  experts_forward(plan.expert_offsets.data(), a, w, plan.received());
  if (ep) expert_parallel::combine(*expert_, plan, w.expert_out, d.hidden, w.staging, w.own_rows);
  kernels::moe_unpermute(perm, ep ? w.own_rows : w.expert_out, nullptr, d.hidden, y);
  if (d.shared_ffn > 0) shared_forward(x, tokens, a, w, y);
  return losses;
}

kernels::MoePermutation MoeMlp::permutation(const MoeActivations& a, int tokens) const {
  const MoeDims& d = dims_;
  if (d.dropless()) return kernels::make_moe_permutation(a.idx, tokens, d.topk, d.experts);
  // The aux loss and the logged loads have counted the choices before this (Megatron's
  // tokens_per_expert before capacity); the dropped ones get no row and weight 0.
  const int capacity = (int)d.capacity(tokens);
  std::vector<unsigned char> keep((size_t)tokens * d.topk);
  kernels::moe_capacity_keep(a.idx, a.weights, tokens, d.topk, d.experts, capacity, d.drop_policy,
                             keep.data());
  return kernels::make_moe_permutation(a.idx, tokens, d.topk, d.experts, keep.data(),
                                       d.pad_to_capacity ? capacity : 0);
}

expert_parallel::DispatchPlan MoeMlp::dispatch_plan(const kernels::MoePermutation& perm,
                                                    const MoeActivations& a) const {
  std::vector<long> per_expert(dims_.experts);
  for (int e = 0; e < dims_.experts; ++e) per_expert[e] = perm.rows_of(e);
  if (!dispatches())
    return expert_parallel::replan_dispatch(1, per_expert.data(), dims_.experts, per_expert.data());
  const expert_parallel::DispatchPlan plan =
      expert_parallel::plan_dispatch(*expert_, per_expert.data(), dims_.experts);
  // The plan holds the worst case for this rank's tokens; a peer with more would overrun it.
  if (plan.received() > dims_.expert_rows(perm.tokens))
    throw std::logic_error("MoE dispatch: " + std::to_string(plan.received()) +
                           " rows received, more than the " +
                           std::to_string(dims_.expert_rows(perm.tokens)) + " planned");
  for (int e = 0; e < dims_.experts; ++e) a.recv_counts[e] = (float)plan.recv_counts[e];
  return plan;
}

expert_parallel::DispatchPlan MoeMlp::kept_dispatch_plan(const kernels::MoePermutation& perm,
                                                         const MoeActivations& a) const {
  std::vector<long> per_expert(dims_.experts), received(dims_.experts);
  for (int e = 0; e < dims_.experts; ++e)
    per_expert[e] = perm.rows_of(e), received[e] = (long)a.recv_counts[e];
  return expert_parallel::replan_dispatch(dims_.expert_parallel, per_expert.data(), dims_.experts,
                                          dispatches() ? received.data() : per_expert.data());
}

void MoeMlp::experts_forward(const long* offsets, const MoeActivations& a, const MoeScratch& w,
                             long rows) const {
  const MoeDims& d = dims_;
  linear_forward(expert_linear(offsets, true), a.rows, w, a.fc1_pre);
  if (d.swiglu)
    kernels::bias_swiglu_forward(a.fc1_pre, nullptr, a.act, (int)rows, d.ffn);
  else
    kernels::bias_gelu_forward(a.fc1_pre, nullptr, a.act, (int)rows, d.ffn);
    // Megatron's experts scale the activation by the routing weight before fc2 (without an
    // fc2 bias the same as weighting fc2's output, HF's order).
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r)
    for (int c = 0; c < d.ffn; ++c)
      w.scaled[r * d.ffn + c] = a.act[r * d.ffn + c] * a.row_weights[r];
  linear_forward(expert_linear(offsets, false), w.scaled, w, w.expert_out);
}

void MoeMlp::forward_inference(kernels::GemmOperand x, int tokens, float* y) const {
  // Generation runs every expert here, as at EP = 1: no exchange, which the other ranks of
  // the expert group, not generating, would never join.
  for (const float* w : fc1_)
    if (!w) throw std::logic_error("MoE generation needs every expert on the generating rank");
  MoeMlp local = *this;
  local.expert_ = nullptr, local.dims_.expert_parallel = 1, local.first_local_ = 0;
  // Generation is dropless: a KV-cache step's few rows would get a capacity of their own
  // (ceil(rows x k / E x factor)), so the tokens generated would depend on how the prompt
  // and the steps split the sequence.
  local.dims_.capacity_factor = -1.0, local.dims_.pad_to_capacity = false;
  const std::vector<long> kept = moe_activation_parts(local.dims_, tokens);
  const std::vector<long> scratch = moe_scratch_parts(local.dims_, tokens);
  // One float buffer per part (the top-k indices, the third, take ints' places).
  std::vector<std::vector<float>> a(kept.size()), w(scratch.size());
  for (size_t i = 0; i < kept.size(); ++i) a[i].resize(kept[i]);
  for (size_t i = 0; i < scratch.size(); ++i) w[i].resize(scratch[i]);
  auto at = [](std::vector<float>& v) { return v.empty() ? nullptr : v.data(); };
  const MoeActivations acts{at(a[0]), at(a[1]),  reinterpret_cast<int*>(at(a[2])),
                            at(a[3]), at(a[4]),  at(a[5]),
                            at(a[6]), at(a[7]),  at(a[8]),
                            at(a[9]), at(a[10]), at(a[11]),
                            at(a[12])};
  auto at16 = [&](std::vector<float>& v) { return reinterpret_cast<kernels::bf16_t*>(at(v)); };
  const MoeScratch work{at(w[0]),  at(w[1]),    at(w[2]),    at(w[3]),  at(w[4]),  at(w[5]),
                        at(w[6]),  at(w[7]),    at(w[8]),    at(w[9]),  at(w[10]), at(w[11]),
                        at(w[12]), at16(w[13]), at16(w[14]), at(w[15]), at(w[16]), at(w[17])};
  local.forward(x, tokens, acts, work, y);
  // Each tensor rank ran its shard of every expert: the partial sums, as the dense fc2's.
  if (tensor_split()) tensor_->all_reduce(y, (long)tokens * dims_.hidden, comm::ReduceOp::kSum);
}

namespace {
// d(act x weight) -> d(act) in place and d(weight) per row: <act, d(scaled)>.
void scale_backward(const float* act, const float* row_weights, float* d_scaled,
                    float* d_row_weights, long rows, int ffn) {
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r) {
    double dot = 0;
    float* g = d_scaled + r * ffn;
    for (int c = 0; c < ffn; ++c) {
      dot += (double)act[r * ffn + c] * g[c];
      g[c] *= row_weights[r];
    }
    d_row_weights[r] = (float)dot;
  }
}
}  // namespace

// On entry w.expert_out holds d(fc2 out) of this rank's rows; on return it holds d(rows)
// and w.d_row_weights the routing weights' gradient. Destroys a.fc1_pre.
void MoeMlp::experts_backward(const long* offsets, const MoeActivations& a, const MoeScratch& w,
                              long rows) const {
  const MoeDims& d = dims_;
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r)
    for (int c = 0; c < d.ffn; ++c)
      w.scaled[r * d.ffn + c] = a.act[r * d.ffn + c] * a.row_weights[r];
  linear_backward(expert_linear(offsets, false), w.expert_out, w.scaled, w, w.d_scaled);
  scale_backward(a.act, a.row_weights, w.d_scaled, w.d_row_weights, rows, d.ffn);
  float* d_pre = a.fc1_pre;  // SwiGLU: its gradient in place
  if (d.swiglu) {
    kernels::swiglu_backward_inplace(w.d_scaled, a.fc1_pre, (int)rows, d.ffn);
  } else {
    kernels::gelu_backward_inplace(a.fc1_pre, w.d_scaled, rows * d.ffn);
    d_pre = w.d_scaled;
  }
  linear_backward(expert_linear(offsets, true), d_pre, a.rows, w, w.expert_out);
}

void MoeMlp::backward(kernels::GemmOperand input, int tokens, const MoeActivations& a,
                      const MoeScratch& w, const float* dy, double loss_grad, float* dx) const {
  const MoeDims& d = dims_;
  const float* x = fp32_input(input, tokens, w);
  // The permutation is a function of the routing (and the capacity's choice, itself one of
  // the routing), rebuilt rather than kept; the plan from it and the counts forward received.
  const kernels::MoePermutation perm = permutation(a, tokens);
  const expert_parallel::DispatchPlan plan = kept_dispatch_plan(perm, a);
  const bool ep = dispatches();
  // Combine's backward is a dispatch, the unpermutation's is a permutation of dy.
  kernels::moe_unpermute_backward(perm, nullptr, nullptr, dy, d.hidden,
                                  ep ? w.own_rows : w.expert_out, nullptr);
  if (ep) expert_parallel::dispatch(*expert_, plan, w.own_rows, d.hidden, w.staging, w.expert_out);
  experts_backward(plan.expert_offsets.data(), a, w, plan.received());
  // The routing weights' and the rows' gradients go back where they came from.
  if (ep) {
    expert_parallel::combine(*expert_, plan, w.d_row_weights, 1, w.staging, w.src_weights);
    expert_parallel::combine(*expert_, plan, w.expert_out, d.hidden, w.staging, w.own_rows);
  }
  kernels::moe_permute_weights_backward(perm, ep ? w.src_weights : w.d_row_weights, w.d_weights);
  // <act, d(act x weight)> over this rank's columns of each expert: a partial sum over t.
  if (tensor_split()) tensor_->all_reduce(w.d_weights, (long)tokens * d.topk, comm::ReduceOp::kSum);
  kernels::moe_permute_backward(perm, ep ? w.own_rows : w.expert_out, d.hidden, dx);
  router_backward(x, tokens, a, w, loss_grad, dx);
  if (d.shared_ffn > 0) shared_backward(x, tokens, a, w, dy, dx);
}

// From the complete routing weights' gradient (w.d_weights) and the losses' seed, the same
// on every tensor rank: the router weight's gradient (complete, accumulated) and its part of
// dx, added to the experts' on one tensor rank only (the caller sums dx over the group).
void MoeMlp::router_backward(const float* x, int tokens, const MoeActivations& a,
                             const MoeScratch& w, double loss_grad, float* dx) const {
  const MoeDims& d = dims_;
  // The routing weights' gradient, then the two losses', into d(logits).
  kernels::moe_router_backward(router_shape(tokens), a.probs, a.idx, a.weights, w.d_weights,
                               w.logits);
  if (d.aux_loss_coeff > 0.0) {
    count_all_tokens(a, tokens, w);
    kernels::moe_aux_loss_backward(a.probs, w.counts, tokens, d.experts,
                                   aux_scale(tokens) * loss_grad, w.logits);
  }
  if (d.z_loss_coeff > 0.0)
    kernels::moe_z_loss_backward(a.probs, a.lse, tokens, d.experts, z_scale(tokens) * loss_grad,
                                 w.logits);
  kernels::linear_backward_weight(w.logits, x, router_.grad, tokens, d.hidden, d.experts);
  if (!tensor_split() || tensor_->rank() == 0)
    kernels::linear_backward_input(w.logits, router_.value, dx, tokens, d.hidden, d.experts, true);
}

}  // namespace trident
