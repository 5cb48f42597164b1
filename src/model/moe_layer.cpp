#include "model/moe_layer.h"

#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/grouped_gemm.h"
#include "kernels/moe_permute.h"
#include "kernels/swiglu.h"

namespace trident {

MoeDims moe_dims(const ModelConfig& c, double aux_loss_coeff, double z_loss_coeff) {
  MoeDims d;
  d.hidden = c.hidden_size;
  d.experts = c.moe.num_experts;
  d.topk = c.moe.router_topk;
  d.ffn = c.moe_ffn();
  d.swiglu = c.swiglu;
  d.pre_softmax = c.moe.router_pre_softmax;
  d.scaling_factor = c.moe.router_topk_scaling_factor;
  d.aux_loss_coeff = aux_loss_coeff;
  d.z_loss_coeff = z_loss_coeff;
  return d;
}

std::vector<long> moe_activation_parts(const MoeDims& d, long tokens) {
  static_assert(sizeof(int) == sizeof(float), "idx takes floats' places");
  const long r = tokens * d.topk;
  return {tokens * d.experts, tokens, r, r, r * d.hidden, r * d.fc1_rows(), r * d.ffn};
}

std::vector<long> moe_scratch_parts(const MoeDims& d, long tokens) {
  const long r = tokens * d.topk;
  return {tokens * d.experts, d.experts, r, r, r, r * d.ffn, r * d.ffn, r * d.hidden};
}

MoeMlp::MoeMlp(const MoeDims& d, Parameters& p, int layer) : dims_(d) {
  router_ = p.get(layer_param(layer, "mlp.router.weight"));
  for (int e = 0; e < d.experts; ++e) {
    const ParamRef fc1 = p.get(moe_expert_param(layer, e, "linear_fc1.weight"));
    const ParamRef fc2 = p.get(moe_expert_param(layer, e, "linear_fc2.weight"));
    fc1_.push_back(fc1.value), fc1_grad_.push_back(fc1.grad);
    fc2_.push_back(fc2.value), fc2_grad_.push_back(fc2.grad);
  }
}

kernels::RouterShape MoeMlp::router_shape(int tokens) const {
  return {tokens, dims_.experts, dims_.topk, dims_.pre_softmax, dims_.scaling_factor};
}

namespace {
// Megatron's z-loss scale at t = 1: coeff / tokens (the mean over the micro-batch's rows).
double z_scale(const MoeDims& d, int tokens) {
  return d.z_loss_coeff / tokens;
}
}  // namespace

MoeLosses MoeMlp::forward(const float* x, int tokens, const MoeActivations& a, const MoeScratch& w,
                          float* y) const {
  const MoeDims& d = dims_;
  kernels::linear_forward(x, router_.value, w.logits, tokens, d.hidden, d.experts);
  kernels::moe_router_forward(router_shape(tokens), w.logits, a.probs, a.lse, a.idx, a.weights);
  MoeLosses losses;
  if (d.aux_loss_coeff > 0.0) {
    kernels::count_tokens_per_expert(a.idx, tokens, d.topk, d.experts, w.counts);
    losses.aux =
        kernels::moe_aux_loss(a.probs, w.counts, tokens, d.experts,
                              kernels::aux_loss_scale(d.aux_loss_coeff, d.experts, d.topk, tokens));
  }
  if (d.z_loss_coeff > 0.0) losses.z = kernels::moe_z_loss(a.lse, tokens, z_scale(d, tokens));

  const kernels::MoePermutation perm =
      kernels::make_moe_permutation(a.idx, tokens, d.topk, d.experts);
  const long rows = perm.rows();
  kernels::moe_permute(perm, x, d.hidden, a.rows);
  const kernels::ExpertGroups fc1{perm.offsets.data(), d.experts, d.hidden, d.fc1_rows()};
  const kernels::ExpertGroups fc2{perm.offsets.data(), d.experts, d.ffn, d.hidden};
  kernels::grouped_linear_forward(fc1, a.rows, fc1_.data(), a.fc1_pre);
  if (d.swiglu)
    kernels::bias_swiglu_forward(a.fc1_pre, nullptr, a.act, (int)rows, d.ffn);
  else
    kernels::bias_gelu_forward(a.fc1_pre, nullptr, a.act, (int)rows, d.ffn);
  // Megatron's experts scale the activation by the routing weight before fc2 (without an
  // fc2 bias the same as weighting fc2's output, HF's order).
  kernels::moe_permute_weights(perm, a.weights, w.row_weights);
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r)
    for (int c = 0; c < d.ffn; ++c)
      w.scaled[r * d.ffn + c] = a.act[r * d.ffn + c] * w.row_weights[r];
  kernels::grouped_linear_forward(fc2, w.scaled, fc2_.data(), w.expert_out);
  kernels::moe_unpermute(perm, w.expert_out, nullptr, d.hidden, y);
  return losses;
}

void MoeMlp::forward_inference(const float* x, int tokens, float* y) const {
  const std::vector<long> kept = moe_activation_parts(dims_, tokens);
  const std::vector<long> scratch = moe_scratch_parts(dims_, tokens);
  // One float buffer per part, the top-k indices as ints (the parts' third).
  std::vector<std::vector<float>> a(kept.size()), w(scratch.size());
  for (size_t i = 0; i < kept.size(); ++i) a[i].resize(kept[i]);
  for (size_t i = 0; i < scratch.size(); ++i) w[i].resize(scratch[i]);
  std::vector<int> idx(kept[2]);
  const MoeActivations acts{a[0].data(), a[1].data(), idx.data(), a[3].data(),
                            a[4].data(), a[5].data(), a[6].data()};
  const MoeScratch work{w[0].data(), w[1].data(), w[2].data(), w[3].data(),
                        w[4].data(), w[5].data(), w[6].data(), w[7].data()};
  forward(x, tokens, acts, work, y);
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

void MoeMlp::backward(const float* x, int tokens, const MoeActivations& a, const MoeScratch& w,
                      const float* dy, double loss_grad, float* dx) const {
  const MoeDims& d = dims_;
  // The permutation is a function of the routing, rebuilt rather than kept.
  const kernels::MoePermutation perm =
      kernels::make_moe_permutation(a.idx, tokens, d.topk, d.experts);
  const long rows = perm.rows();
  const kernels::ExpertGroups fc1{perm.offsets.data(), d.experts, d.hidden, d.fc1_rows()};
  const kernels::ExpertGroups fc2{perm.offsets.data(), d.experts, d.ffn, d.hidden};
  kernels::moe_unpermute_backward(perm, nullptr, nullptr, dy, d.hidden, w.expert_out, nullptr);
  kernels::moe_permute_weights(perm, a.weights, w.row_weights);
#pragma omp parallel for schedule(static)
  for (long r = 0; r < rows; ++r)
    for (int c = 0; c < d.ffn; ++c)
      w.scaled[r * d.ffn + c] = a.act[r * d.ffn + c] * w.row_weights[r];
  kernels::grouped_linear_backward_weight(fc2, w.expert_out, w.scaled, fc2_grad_.data());
  kernels::grouped_linear_backward_input(fc2, w.expert_out, fc2_.data(), w.d_scaled);
  scale_backward(a.act, w.row_weights, w.d_scaled, w.d_row_weights, rows, d.ffn);
  kernels::moe_permute_weights_backward(perm, w.d_row_weights, w.d_weights);
  float* d_pre = a.fc1_pre;  // SwiGLU: its gradient in place
  if (d.swiglu) {
    kernels::swiglu_backward_inplace(w.d_scaled, a.fc1_pre, (int)rows, d.ffn);
  } else {
    kernels::gelu_backward_inplace(a.fc1_pre, w.d_scaled, rows * d.ffn);
    d_pre = w.d_scaled;
  }
  kernels::grouped_linear_backward_weight(fc1, d_pre, a.rows, fc1_grad_.data());
  kernels::grouped_linear_backward_input(fc1, d_pre, fc1_.data(), w.expert_out);
  kernels::moe_permute_backward(perm, w.expert_out, d.hidden, dx);

  // The router: the routing weights' gradient, then the two losses', into d(logits).
  kernels::moe_router_backward(router_shape(tokens), a.probs, a.idx, a.weights, w.d_weights,
                               w.logits);
  if (d.aux_loss_coeff > 0.0) {
    kernels::count_tokens_per_expert(a.idx, tokens, d.topk, d.experts, w.counts);
    const double scale = kernels::aux_loss_scale(d.aux_loss_coeff, d.experts, d.topk, tokens);
    kernels::moe_aux_loss_backward(a.probs, w.counts, tokens, d.experts, scale * loss_grad,
                                   w.logits);
  }
  if (d.z_loss_coeff > 0.0)
    kernels::moe_z_loss_backward(a.probs, a.lse, tokens, d.experts, z_scale(d, tokens) * loss_grad,
                                 w.logits);
  kernels::linear_backward_weight(w.logits, x, router_.grad, tokens, d.hidden, d.experts);
  kernels::linear_backward_input(w.logits, router_.value, dx, tokens, d.hidden, d.experts, true);
}

}  // namespace trident
