// The shared experts of an MoE layer (--moe-shared-expert-intermediate-size, Megatron's
// SharedExpertMLP; Qwen2-MoE's shared_expert): a dense MLP of width S on every row beside
// the routed experts, its output added to theirs, optionally scaled per row by
// sigmoid(x . gate_weight) (--moe-shared-expert-gate, Megatron's gate_weight [1, h]).
// Tensor-parallel as the dense MLP (fc1's rows column-split, fc2's columns row-split), on
// the rows the MoE layer is given (all of the micro-batch's at t > 1), so fc2's output is
// a partial sum over the tensor group that joins the experts' before the caller reduces
// it. The gate is replicated: every tensor rank computes it on the same rows, its
// gradient <shared output, dy> is summed over the group (the output is partial), and its
// part of dx is added on tensor rank 0 only, as the router's (model/moe_layer.h). In bf16
// runs fc1 and fc2 take bf16 operands as the experts' (MoeMlp::Linear); the gate is fp32.
#include <cmath>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/swiglu.h"
#include "model/moe_layer.h"

namespace trident {

void MoeMlp::shared_forward(const float* x, int tokens, const MoeActivations& a,
                            const MoeScratch& w, float* y) const {
  const MoeDims& d = dims_;
  const int h = d.hidden;
  const long rows[2] = {0, tokens};
  linear_forward(shared_linear(rows, true), x, w, a.shared_fc1_pre);
  if (d.swiglu)
    kernels::bias_swiglu_forward(a.shared_fc1_pre, nullptr, a.shared_act, tokens, d.shared_ffn);
  else
    kernels::bias_gelu_forward(a.shared_fc1_pre, nullptr, a.shared_act, tokens, d.shared_ffn);
  float* out = d.shared_gate ? a.shared_out : w.shared_d_out;  // kept for the gate's backward
  linear_forward(shared_linear(rows, false), a.shared_act, w, out);
  if (!d.shared_gate) {
    kernels::accumulate(y, out, (long)tokens * h);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int t = 0; t < tokens; ++t) {
    double logit = 0;
    for (int c = 0; c < h; ++c) logit += (double)x[(long)t * h + c] * shared_gate_.value[c];
    const float gate = (float)(1.0 / (1.0 + std::exp(-logit)));
    a.shared_gate[t] = gate;
    for (int c = 0; c < h; ++c) y[(long)t * h + c] += gate * out[(long)t * h + c];
  }
}

void MoeMlp::shared_backward(const float* x, int tokens, const MoeActivations& a,
                             const MoeScratch& w, const float* dy, float* dx) const {
  const MoeDims& d = dims_;
  const int h = d.hidden;
  const float* d_out = dy;
  if (d.shared_gate) {
    // d(out) = gate x dy; d(gate logit) = <out, dy> gate (1 - gate), out partial over t.
    std::vector<float> d_logit(tokens);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < tokens; ++t) {
      double dot = 0;
      const float gate = a.shared_gate[t];
      for (int c = 0; c < h; ++c) {
        const long i = (long)t * h + c;
        dot += (double)a.shared_out[i] * dy[i];
        w.shared_d_out[i] = gate * dy[i];
      }
      d_logit[t] = (float)dot;
    }
    if (tensor_split()) tensor_->all_reduce(d_logit.data(), tokens, comm::ReduceOp::kSum);
    for (int t = 0; t < tokens; ++t) d_logit[t] *= a.shared_gate[t] * (1.f - a.shared_gate[t]);
    kernels::linear_backward_weight(d_logit.data(), x, shared_gate_.grad, tokens, h, 1);
    if (!tensor_split() || tensor_->rank() == 0)
      kernels::linear_backward_input(d_logit.data(), shared_gate_.value, dx, tokens, h, 1, true);
    d_out = w.shared_d_out;
  }
  const long rows[2] = {0, tokens};
  linear_backward(shared_linear(rows, false), d_out, a.shared_act, w, w.shared_d_act);
  float* d_pre = a.shared_fc1_pre;  // SwiGLU: its gradient in place
  if (d.swiglu) {
    kernels::swiglu_backward_inplace(w.shared_d_act, a.shared_fc1_pre, tokens, d.shared_ffn);
  } else {
    kernels::gelu_backward_inplace(a.shared_fc1_pre, w.shared_d_act, (long)tokens * d.shared_ffn);
    d_pre = w.shared_d_act;
  }
  linear_backward(shared_linear(rows, true), d_pre, x, w, dx, true);
}

}  // namespace trident
