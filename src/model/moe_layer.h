#pragma once
// The mixture-of-experts MLP of an MoE layer (issue 32; /work/notes/moe_design.md B3) in
// fp32 or bf16, any expert-parallel size EP and tensor-parallel size t: the router (fp32 logits x
// Wr^T, Megatron's softmax / top-k conventions), its load-balancing and z losses, the
// expert-major permutation, one grouped fc1, the activation (SwiGLU or GeLU, as the dense
// MLP), the routing weight applied to the activation before fc2 (as Megatron's experts do),
// one grouped fc2 and the unpermutation that sums each token's k rows. Backward goes through
// all of it, the router included. With EP > 1 the permuted rows and their routing weights
// go to the ranks of their experts and the outputs come back (expert_parallel/dispatcher.h);
// this rank runs and holds only its E/EP experts, which training keeps in the chunk's expert
// buffer (parameters/parameter_layout.h ExpertSlice), reduced over the expert-data group.
// With a capacity factor each expert keeps at most its capacity of the micro-batch's
// choices (Megatron's token dropping, optionally padded to it); shared experts, a dense
// MLP every row passes through (optionally gated), add their output to the routed one.
//
// fp16 (MoeDims::fp16, --fp16): the same products with their operands (the weights' fp16
// copies, the rows and output gradients) rounded through fp16 into MoeScratch's fp32 in32 /
// out32 / weight32 and multiplied in fp32, expert by expert, as kernels/mixed_linear.h's fp16
// path: numerically fp16 (an overflow gives inf, which the loss scaler's verdict sees in the
// expert gradients), no faster. The router is fp32.
//
// bf16 (MoeDims::bf16, --bf16): the experts' and the shared experts' products take bf16
// operands (their weights' bf16 copies, which Parameters refreshes after each step; the rows
// and output gradients rounded into MoeScratch's in16 / out16) and accumulate in fp32, as
// the dense linears do (kernels/mixed_linear.h); weight gradients are fp32. The router stays
// fp32 (Megatron's --moe-router-dtype fp32 default, for stability): a bf16 layer input is
// widened to fp32 (MoeScratch::x32) for the router, the shared experts' gate and the
// permutation, so the rows sent to the experts are fp32 and rounded only as product operands.
//
// Tensor parallelism (t > 1, expert tensor-parallel size t): the layer is given ALL rows of
// the micro-batch (the caller all-gathers the sequence-parallel rows, as for the dense fc1)
// and every tensor rank routes them all, identically, so the router, its losses and the
// dispatch are those of t = 1. Each rank runs its tensor shard of each expert (fc1's rows,
// fc2's columns: MoeDims::ffn is F / t), so the output is a partial sum over the tensor
// group that the caller reduce-scatters (or all-reduces) as after the dense fc2. Backward:
// the routing weights' gradient <act, d(act x weight)> is partial too and is summed over the
// tensor group (tokens x k floats) before the router's backward, which then runs identically
// on every rank: the router weight's gradient is complete (it is not summed again with the
// LayerNorms', tensor_parallel/sequence_parallel_grads.h), and the router's part of dx,
// identical everywhere, is added on tensor rank 0 only, since the caller sums dx over the
// group. The tensor ranks of one data-parallel rank dispatch the same rows to their peers of
// equal tensor rank (the expert group), so the all-to-all moves t times Megatron's volume
// (which dispatches the 1/t sequence-parallel rows and all-gathers after the exchange).
//
// Whole experts (--expert-tensor-parallel-size 1 at t > 1, MoeDims::token_parallel = t): as
// Megatron's alltoall dispatcher at ETP = 1, each tensor rank routes only its own tokens / t
// sequence-parallel rows (no gather, no reduce-scatter: the output is complete on those
// rows), the expert group spans tensor ranks and each expert runs whole on its rank. The
// router losses stay those of all the micro-batch's tokens: the tokens per expert are summed
// over the token group (the tensor group) before the aux loss and its gradient, both losses
// are scaled by the micro-batch's token count and their values summed over the group
// (Megatron's reduce over tp x cp in the router). The router weight's gradient is then
// partial (each rank's tokens) and is summed over the tensor group with the sequence-parallel
// LayerNorms' (tensor_parallel/sequence_parallel_grads.h); the router's part of dx is every
// rank's own.
#include <vector>

#include "comm/communicator.h"
#include "expert_parallel/dispatcher.h"
#include "kernels/grouped_gemm.h"
#include "kernels/low_precision.h"
#include "kernels/moe_permute.h"
#include "kernels/moe_router.h"
#include "parameters/parameters.h"

namespace trident {

struct MoeDims {
  int hidden = 0;
  int experts = 0;
  int topk = 0;
  int ffn = 0;  // this rank's share of each expert's width: --moe-ffn-hidden-size / t
  bool swiglu = false;
  bool pre_softmax = false;
  float scaling_factor = 0.f;  // --moe-router-topk-scaling-factor; 0: none
  // The loss coefficients (--moe-aux-loss-coeff with aux_loss, --moe-z-loss-coeff).
  double aux_loss_coeff = 0.0;
  double z_loss_coeff = 0.0;
  int expert_parallel = 1;  // EP: ranks the experts are split over
  int tensor_parallel = 1;  // ETP: the experts' tensor-parallel size, ranks each expert spans
  // t / ETP at ETP < t (1 otherwise): the tensor ranks the micro-batch's rows are split over,
  // each routing its own (sequence-parallel) rows. The router losses are then over all of
  // them, their sums completed over that group (MoeMlp::set_token_group).
  int token_parallel = 1;
  // Token dropping (--moe-expert-capacity-factor; < 0: dropless), padding every expert's
  // input to its capacity (--moe-pad-expert-input-to-capacity) and who is dropped.
  double capacity_factor = -1.0;
  bool pad_to_capacity = false;
  kernels::DropPolicy drop_policy = kernels::DropPolicy::kProbs;
  // Shared experts (--moe-shared-expert-intermediate-size S): a dense MLP of this rank's
  // S / t columns beside the routed experts on every row; 0: none. shared_gate: its output
  // scaled by sigmoid(x . gate_weight) (--moe-shared-expert-gate).
  int shared_ffn = 0;
  bool shared_gate = false;
  bool bf16 = false;  // the expert products in bf16 (--bf16); the router is fp32 either way
  // The expert products' operands rounded through fp16 and multiplied in fp32 (--fp16), as
  // the dense linears' fp16 path; the router is fp32.
  bool fp16 = false;

  int fc1_rows() const { return swiglu ? 2 * ffn : ffn; }
  int shared_fc1_rows() const { return swiglu ? 2 * shared_ffn : shared_ffn; }
  int local_experts() const { return experts / expert_parallel; }
  // The rows the layer routes of a micro-batch of `tokens` rows: all of them at ETP = t,
  // this rank's tokens / t at ETP = 1 < t.
  long routed_tokens(long tokens) const { return tokens / token_parallel; }
  bool dropless() const { return capacity_factor < 0.0; }
  // Each expert's capacity for a micro-batch of `tokens` rows (all of them at t > 1),
  // Megatron's get_capacity: ceil(tokens x k / E x factor). Only when !dropless().
  long capacity(long tokens) const;
  // This rank's permuted rows before dispatch: tokens x k at most, E x capacity when padded.
  long permuted_rows(long tokens) const;
  // Rows this rank's experts may receive for `tokens` rows per rank: the dropless worst case
  // (tokens x k at EP = 1), at most EP x E/EP x capacity with a capacity and exactly that
  // when padded.
  long expert_rows(long tokens) const;
};

// At tensor-parallel size t and expert tensor-parallel size ETP (0: t; which must divide
// --moe-ffn-hidden-size), with or without sequence parallelism (ETP < t routes each tensor
// rank's own rows, which needs it).
MoeDims moe_dims(const ModelConfig& config, double aux_loss_coeff, double z_loss_coeff,
                 int tensor_parallel = 1, int expert_tensor_parallel = 0,
                 bool sequence_parallel = false);

// What one micro-batch of `tokens` rows (all of them at t > 1: the gathered rows) keeps from
// forward for backward. R: the rows this rank's experts received, at most MoeDims::expert_rows
// (tokens x k at EP = 1, where it is also the exact size).
struct MoeActivations {
  float* probs;        // [tokens, E]: the softmax over all experts
  float* lse;          // [tokens]
  int* idx;            // [tokens, k]
  float* weights;      // [tokens, k]
  float* rows;         // [R, h]: the experts' input rows, expert-major
  float* fc1_pre;      // [R, fc1 rows]
  float* act;          // [R, ffn]: the activation before the routing weight
  float* row_weights;  // [R]: the rows' routing weights
  float* recv_counts;  // [E]: the dispatch's received counts (DispatchPlan::recv_counts)
  // Shared experts (null without): fc1's output, the activation, and with the gate its
  // sigmoid [tokens] and the ungated output [tokens, h] (this rank's partial sum at t > 1).
  float* shared_fc1_pre;  // [tokens, shared fc1 rows]
  float* shared_act;      // [tokens, shared ffn]
  float* shared_gate;     // [tokens]
  float* shared_out;      // [tokens, h]
};

// Scratch shared by every MoE layer; nothing survives a call.
// S = MoeDims::permuted_rows (tokens x k; E x capacity when padded): this rank's own
// permuted rows, before dispatch and after combine.
struct MoeScratch {
  float* logits;         // [tokens, E]: the logits, then d(logits)
  float* counts;         // [E]
  float* src_weights;    // [S]: the routing weights in permuted order, then their gradient
  float* d_row_weights;  // [R]
  float* d_weights;      // [tokens, k]
  float* scaled;         // [R, ffn]: act x weight (fc2's input); in backward d(act)
  float* d_scaled;       // [R, ffn]
  float* expert_out;     // [R, h]: fc2's output rows; in backward their gradient, then d(rows)
  float* own_rows;       // [S, h] with EP > 1 (else none): rows to dispatch / combined back
  float* staging;        // [R, h] with EP > 1 (else none): the all-to-all's landing place
  float* shared_d_out;   // [tokens, h] with shared experts: fc2's output, then its gradient
  float* shared_d_act;   // [tokens, shared ffn] with shared experts
  // bf16 only (else none): the layer input widened to fp32 [tokens, h], and the products'
  // rounded operands: in16 an input (rows, act x weight, the shared experts' x and act),
  // out16 an output gradient (d(fc2 out), d(fc1 out), the shared experts' alike).
  float* x32;
  kernels::bf16_t* in16;   // [max(R x max(h, ffn), tokens x max(h, shared ffn))]
  kernels::bf16_t* out16;  // [max(R x max(h, fc1 rows), tokens x max(h, shared fc1 rows))]
  // fp16 only (else none): the same two operands rounded through fp16, in fp32, and one
  // expert's (or the shared experts') weight expanded from its fp16 copy.
  float* in32;      // as in16
  float* out32;     // as out16
  float* weight32;  // [the largest expert or shared-expert weight]
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
  // layer: the layer's global index, which names its parameters. expert: the expert group
  // (dims.expert_parallel ranks; null at EP = 1), which must outlive the layer. The router
  // comes from `params`, this rank's experts from `experts` (the expert buffer under expert
  // parallelism; else `params` again, which then holds all E).
  MoeMlp(const MoeDims& dims, Parameters& params, Parameters& experts, int layer,
         comm::Communicator* expert = nullptr);

  // y [tokens, h] = the experts' weighted sum for x [tokens, h] (overwritten). At t > 1: x
  // is every row of the micro-batch (the same on each tensor rank) and y this rank's
  // partial sum, which the caller reduces over the tensor group.
  MoeLosses forward(kernels::GemmOperand x, int tokens, const MoeActivations& a,
                    const MoeScratch& w, float* y) const;
  // Generation: y [tokens, h] as forward computes it, on buffers of its own sized for
  // `tokens` (a step's few new rows); no router loss, nothing kept. Needs all E experts
  // (a one-process model: generation while training builds one from the gathered weights).
  // At t > 1 (generation's rows are not sequence-parallel) y is all-reduced over the tensor
  // group here, complete.
  void forward_inference(kernels::GemmOperand x, int tokens, float* y) const;
  // dx [tokens, h] = dL/dx (overwritten) for dy = dL/dy, where L also holds
  // loss_grad x (aux + z) of this micro-batch (loss_grad: the factor the language-model
  // loss's per-token mean gets, see GPTModel::forward_chunk). Weight gradients accumulate.
  // Destroys a.fc1_pre. At t > 1: dy is complete (the same on each tensor rank) and dx this
  // rank's partial sum, which the caller sums over the tensor group.
  void backward(kernels::GemmOperand x, int tokens, const MoeActivations& a, const MoeScratch& w,
                const float* dy, double loss_grad, float* dx) const;

  const MoeDims& dims() const { return dims_; }
  // The tensor group at t > 1 (null or one rank: t = 1), which must outlive the layer and
  // hold dims().tensor_parallel ranks. Set after construction.
  void set_tensor_group(comm::Communicator* tensor);
  // The token group at ETP < t (dims().token_parallel ranks: the tensor group), over which
  // the router losses' sums are completed. Set after construction; null: none.
  void set_token_group(comm::Communicator* tokens);

 private:
  kernels::RouterShape router_shape(int tokens) const;
  // The expert-major rows of this routing: every choice (dropless), or those within their
  // expert's capacity, each expert padded to it with zero rows when asked.
  kernels::MoePermutation permutation(const MoeActivations& a, int tokens) const;
  // The experts' half of forward / backward: this rank's E/EP experts on their rows.
  void experts_forward(const long* offsets, const MoeActivations& a, const MoeScratch& w,
                       long rows) const;
  void experts_backward(const long* offsets, const MoeActivations& a, const MoeScratch& w,
                        long rows) const;
  // The router's half of backward (after the experts').
  void router_backward(const float* x, int tokens, const MoeActivations& a, const MoeScratch& w,
                       double loss_grad, float* dx) const;
  // The shared experts' forward (adds their output to y) and backward (adds to dx; the
  // gate's dx part on tensor rank 0 only, as the router's).
  void shared_forward(const float* x, int tokens, const MoeActivations& a, const MoeScratch& w,
                      float* y) const;
  void shared_backward(const float* x, int tokens, const MoeActivations& a, const MoeScratch& w,
                       const float* dy, float* dx) const;
  // x as fp32: as given, or a bf16 input widened into w.x32.
  const float* fp32_input(kernels::GemmOperand x, int tokens, const MoeScratch& w) const;
  // The grouped products of one linear (fc1 or fc2 of the local experts, or the shared
  // experts' as one group) in the layer's precision: fp32, or bf16 operands rounded into
  // w.in16 / w.out16. backward: dx (+)= dy w and dw += dy^T x.
  struct Linear {
    kernels::ExpertGroups groups;
    const float* const* fp32;
    const kernels::bf16_t* const* low;
    float* const* grad;
  };
  void linear_forward(const Linear& l, const float* x, const MoeScratch& w, float* y) const;
  void linear_backward(const Linear& l, const float* dy, const float* x, const MoeScratch& w,
                       float* dx, bool accumulate = false) const;
  // The fp16 path of the two (MoeDims::fp16).
  void fp16_forward(const Linear& l, const float* x, const MoeScratch& w, float* y) const;
  void fp16_backward(const Linear& l, const float* dy, const float* x, const MoeScratch& w,
                     float* dx, bool accumulate) const;
  Linear expert_linear(const long* offsets, bool fc1) const;
  Linear shared_linear(const long* offsets, bool fc1) const;
  bool dispatches() const { return expert_ && expert_->size() > 1; }
  bool tensor_split() const { return tensor_ && tensor_->size() > 1; }
  bool tokens_split() const { return tokens_ && tokens_->size() > 1; }
  // The micro-batch's tokens per expert over every rank that routes part of it (w.counts).
  void count_all_tokens(const MoeActivations& a, int tokens, const MoeScratch& w) const;
  // The aux loss's and the z-loss's scales for this rank's `tokens` rows: over all the
  // micro-batch's tokens.
  double aux_scale(int tokens) const;
  double z_scale(int tokens) const;
  // Forward's plan (exchanging counts with EP > 1, kept in a.recv_counts) and backward's
  // (from the kept counts, without communication).
  expert_parallel::DispatchPlan dispatch_plan(const kernels::MoePermutation& perm,
                                              const MoeActivations& a) const;
  expert_parallel::DispatchPlan kept_dispatch_plan(const kernels::MoePermutation& perm,
                                                   const MoeActivations& a) const;

  MoeDims dims_;
  comm::Communicator* expert_ = nullptr;
  comm::Communicator* tensor_ = nullptr;  // t > 1 only
  comm::Communicator* tokens_ = nullptr;  // ETP < t only
  int first_local_ = 0;                   // this rank's first expert (global index)
  ParamRef router_{};
  // The shared experts' fc1 rows / fc2 columns of this tensor rank and the gate [1, h]
  // (dense buffer; empty without).
  ParamRef shared_fc1_{}, shared_fc2_{}, shared_gate_{};
  // Indexed by global expert; null for the experts another rank holds.
  std::vector<const float*> fc1_, fc2_;
  std::vector<float*> fc1_grad_, fc2_grad_;
  // Their 16-bit copies (bf16 or fp16 runs).
  std::vector<const kernels::bf16_t*> fc1_low_, fc2_low_;
};

}  // namespace trident
