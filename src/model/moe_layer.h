#pragma once
// The mixture-of-experts MLP of an MoE layer (issue 32; /work/notes/moe_design.md B3) at
// expert- and tensor-parallel size 1, in fp32: the router (fp32 logits x Wr^T, Megatron's
// softmax / top-k conventions), its load-balancing and z losses, the expert-major
// permutation, one grouped fc1, the activation (SwiGLU or GeLU, as the dense MLP), the
// routing weight applied to the activation before fc2 (as Megatron's experts do), one
// grouped fc2 and the unpermutation that sums each token's k rows. Backward goes through
// all of it, the router included.
#include <vector>

#include "kernels/moe_router.h"
#include "parameters/parameters.h"

namespace trident {

struct MoeDims {
  int hidden = 0;
  int experts = 0;
  int topk = 0;
  int ffn = 0;  // each expert's width (--moe-ffn-hidden-size)
  bool swiglu = false;
  bool pre_softmax = false;
  float scaling_factor = 0.f;  // --moe-router-topk-scaling-factor; 0: none
  // The loss coefficients (--moe-aux-loss-coeff with aux_loss, --moe-z-loss-coeff).
  double aux_loss_coeff = 0.0;
  double z_loss_coeff = 0.0;

  int fc1_rows() const { return swiglu ? 2 * ffn : ffn; }
};

MoeDims moe_dims(const ModelConfig& config, double aux_loss_coeff, double z_loss_coeff);

// What one micro-batch of `tokens` rows keeps from forward for backward (R = tokens x k
// rows after the permutation: the dropless worst case, which is also its exact size).
struct MoeActivations {
  float* probs;    // [tokens, E]: the softmax over all experts
  float* lse;      // [tokens]
  int* idx;        // [tokens, k]
  float* weights;  // [tokens, k]
  float* rows;     // [R, h]: the permuted input
  float* fc1_pre;  // [R, fc1 rows]
  float* act;      // [R, ffn]: the activation before the routing weight
};

// Scratch shared by every MoE layer; nothing survives a call.
struct MoeScratch {
  float* logits;         // [tokens, E]: the logits, then d(logits)
  float* counts;         // [E]
  float* row_weights;    // [R]: the routing weights in permuted order
  float* d_row_weights;  // [R]
  float* d_weights;      // [tokens, k]
  float* scaled;         // [R, ffn]: act x weight (fc2's input); in backward d(act)
  float* d_scaled;       // [R, ffn]
  float* expert_out;     // [R, h]: fc2's output rows; in backward their gradient, then d(rows)
};

// The floats of each part of MoeActivations and MoeScratch, in their fields' order, for
// `tokens` rows (the memory plan's rows; idx takes a float's place per int).
std::vector<long> moe_activation_parts(const MoeDims& d, long tokens);
std::vector<long> moe_scratch_parts(const MoeDims& d, long tokens);

// The two router losses of one micro-batch of one layer, coefficients included.
struct MoeLosses {
  double aux = 0.0;  // coeff x E / (k T^2) x sum_e n_e sum_x p(x, e)
  double z = 0.0;    // coeff x mean_x lse(x)^2
};

class MoeMlp {
 public:
  MoeMlp() = default;
  // layer: the layer's global index, which names its parameters.
  MoeMlp(const MoeDims& dims, Parameters& params, int layer);

  // y [tokens, h] = the experts' weighted sum for x [tokens, h] (overwritten).
  MoeLosses forward(const float* x, int tokens, const MoeActivations& a, const MoeScratch& w,
                    float* y) const;
  // Generation: y [tokens, h] as forward computes it, on buffers of its own sized for
  // `tokens` (a step's few new rows); no router loss, nothing kept.
  void forward_inference(const float* x, int tokens, float* y) const;
  // dx [tokens, h] = dL/dx (overwritten) for dy = dL/dy, where L also holds
  // loss_grad x (aux + z) of this micro-batch (loss_grad: the factor the language-model
  // loss's per-token mean gets, see GPTModel::forward_chunk). Weight gradients accumulate.
  // Destroys a.fc1_pre.
  void backward(const float* x, int tokens, const MoeActivations& a, const MoeScratch& w,
                const float* dy, double loss_grad, float* dx) const;

  const MoeDims& dims() const { return dims_; }

 private:
  kernels::RouterShape router_shape(int tokens) const;

  MoeDims dims_;
  ParamRef router_{};
  std::vector<const float*> fc1_, fc2_;
  std::vector<float*> fc1_grad_, fc2_grad_;
};

}  // namespace trident
