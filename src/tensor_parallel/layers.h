#pragma once
// ColumnParallelLinear, RowParallelLinear and VocabParallelEmbedding over one rank's
// shards. Biases are returned to the caller un-added (Megatron's skip_bias_add) so they
// can be fused into the element-wise kernel that follows.
#include <functional>

#include "comm/communicator.h"
#include "kernels/mixed_linear.h"
#include "parameters/parameters.h"
#include "tensor_parallel/lora.h"

namespace trident::tensor_parallel {

// Y = f(X) A_i^T with A split by output rows: weight [out / t, in].
struct ColumnParallelLinear {
  ParamRef weight;
  ParamRef bias;  // numel 0 when the layer has none
  int in = 0;
  int out_local = 0;
  comm::Communicator* tp = nullptr;
  const kernels::LinearPrecision* precision = nullptr;  // fp32 when null
  // Sequence parallelism: x is the all-gathered input and backward leaves dx as this rank's
  // partial sum; the caller reduce-scatters it (gather_from_sequence_parallel_region's
  // backward) instead of the all-reduce of f.
  bool sequence_parallel = false;
  // LoRA (tensor_parallel/lora.h): inactive unless set. A frozen base has no weight.grad.
  // Every call's lora_call: which samples its rows are (--lora-dropout; none by default:
  // evaluation and generation) and the branch's scratch.
  LoraBranch lora{};

  void forward(kernels::GemmOperand x, float* y, int rows, const LoraCall& lora_call = {}) const;
  // Accumulates dW (and db); writes dx and all-reduces it (f's backward).
  void backward(const float* dy, kernels::GemmOperand x, float* dx, int rows,
                const LoraCall& lora_call = {}) const;
  // The same without the all-reduce: dx is this rank's partial sum, for a caller that
  // reduces several calls' dx at once.
  // For a layer followed by GeLU (fc1): d_act = d(GeLU(y + b)), pre = y + b. The GeLU
  // backward, the bias gradient and (bf16) the rounding of dy are one pass; d_act is
  // overwritten. dx is all-reduced as in backward().
  void backward_through_gelu(float* d_act, const float* pre, kernels::GemmOperand x, float* dx,
                             int rows, const LoraCall& lora_call = {}) const;
  // For fc1 followed by SwiGLU: d_act = d(SwiGLU(y + b)) [rows, out_local / 2], pre = y + b
  // ([gate | up]). The SwiGLU backward, the bias gradient and (bf16) the rounding of dy are
  // one pass; pre is overwritten (fp32: with d(pre)).
  void backward_through_swiglu(const float* d_act, float* pre, kernels::GemmOperand x, float* dx,
                               int rows, const LoraCall& lora_call = {}) const;
  // dy may come already in bf16 (when there is no bias to reduce).
  void backward_partial(kernels::GemmOperand dy, kernels::GemmOperand x, float* dx, int rows,
                        const LoraCall& lora_call = {}) const;

 private:
  // The LoRA branch's backward into this rank's partial dx (nothing when inactive).
  void lora_backward(kernels::GemmOperand dy, kernels::GemmOperand x, float* dx, int rows,
                     const LoraCall& lora_call) const;
};

// Y = g(X_i A_i^T) with A split by input columns: weight [out, in / t]; bias replicated.
struct RowParallelLinear {
  ParamRef weight;
  ParamRef bias;
  int in_local = 0;
  int out = 0;
  comm::Communicator* tp = nullptr;
  const kernels::LinearPrecision* precision = nullptr;
  // Sequence parallelism: forward leaves y as this rank's partial product; the caller
  // reduce-scatters it (reduce_scatter_to_sequence_parallel_region) instead of g's
  // all-reduce, and hands backward the all-gathered dy. The bias gradient is then summed
  // over all rows on every rank, so it is complete without a tensor-parallel all-reduce.
  bool sequence_parallel = false;
  LoraBranch lora{};  // as ColumnParallelLinear's; its partial output joins the base's

  void forward(kernels::GemmOperand x, float* y, int rows, const LoraCall& lora_call = {}) const;
  void backward(const float* dy, kernels::GemmOperand x, float* dx, int rows,
                const LoraCall& lora_call = {}) const;
};

// Token embedding over this rank's vocabulary range plus the (replicated) learned
// position embedding; partial lookups are summed over the group.
struct VocabParallelEmbedding {
  ParamRef word;      // [vocab / t, hidden]
  ParamRef position;  // [max_positions, hidden]; none (null) with RoPE
  int vocab_start = 0;
  int vocab_local = 0;
  int hidden = 0;
  comm::Communicator* tp = nullptr;
  // Sequence parallelism: the partial lookups are reduce-scattered, so out holds this
  // rank's rows only (the position embedding is added to them), and backward all-gathers
  // dout. Both then need `full`, [batch * seq, hidden] of scratch.
  bool sequence_parallel = false;
  // Sharded weights (ZeRO-3, data_parallel/sharded_embedding.h): this rank's partial rows
  // come from the data-parallel ranks that hold them, and their gradient goes back there,
  // in place of the local table's lookup and scatter-add.
  std::function<void(const int* ids, int rows, float* out)> sharded_lookup;
  std::function<void(const int* ids, int rows, const float* dout)> sharded_lookup_backward;

  // positions: [batch * seq] of the learned position table's rows, or null (token t at t).
  void forward(const int* ids, int batch, int seq, float* out, float* full = nullptr,
               const int* positions = nullptr) const;
  // The position gradient is taken from the all-gathered dout, so it is complete on every
  // rank (no tensor-parallel all-reduce afterwards).
  void backward(const int* ids, int batch, int seq, const float* dout, float* full = nullptr,
                const int* positions = nullptr) const;
  // This rank's partial rows of ids (zeros outside its vocabulary range).
  void lookup(const int* ids, int rows, float* out) const;
};

}  // namespace trident::tensor_parallel
