#pragma once
// ColumnParallelLinear, RowParallelLinear and VocabParallelEmbedding over one rank's
// shards. Biases are returned to the caller un-added (Megatron's skip_bias_add) so they
// can be fused into the element-wise kernel that follows.
#include "comm/communicator.h"
#include "kernels/mixed_linear.h"
#include "model/parameters.h"

namespace trident::tensor_parallel {

// Y = f(X) A_i^T with A split by output rows: weight [out / t, in].
struct ColumnParallelLinear {
  ParamRef weight;
  ParamRef bias;  // numel 0 when the layer has none
  int in = 0;
  int out_local = 0;
  comm::Communicator* tp = nullptr;
  const kernels::LinearPrecision* precision = nullptr;  // fp32 when null

  void forward(kernels::GemmOperand x, float* y, int rows) const;
  // Accumulates dW (and db); writes dx and all-reduces it (f's backward).
  void backward(const float* dy, kernels::GemmOperand x, float* dx, int rows) const;
  // The same without the all-reduce: dx is this rank's partial sum, for a caller that
  // reduces several calls' dx at once.
  // For a layer followed by GeLU (fc1): d_act = d(GeLU(y + b)), pre = y + b. The GeLU
  // backward, the bias gradient and (bf16) the rounding of dy are one pass; d_act is
  // overwritten. dx is all-reduced as in backward().
  void backward_through_gelu(float* d_act, const float* pre, kernels::GemmOperand x, float* dx,
                             int rows) const;
  // dy may come already in bf16 (when there is no bias to reduce).
  void backward_partial(kernels::GemmOperand dy, kernels::GemmOperand x, float* dx, int rows) const;
};

// Y = g(X_i A_i^T) with A split by input columns: weight [out, in / t]; bias replicated.
struct RowParallelLinear {
  ParamRef weight;
  ParamRef bias;
  int in_local = 0;
  int out = 0;
  comm::Communicator* tp = nullptr;
  const kernels::LinearPrecision* precision = nullptr;

  void forward(kernels::GemmOperand x, float* y, int rows) const;
  void backward(const float* dy, kernels::GemmOperand x, float* dx, int rows) const;
};

// Token embedding over this rank's vocabulary range plus the (replicated) learned
// position embedding; partial lookups are summed over the group.
struct VocabParallelEmbedding {
  ParamRef word;      // [vocab / t, hidden]
  ParamRef position;  // [max_positions, hidden]
  int vocab_start = 0;
  int vocab_local = 0;
  int hidden = 0;
  comm::Communicator* tp = nullptr;

  void forward(const int* ids, int batch, int seq, float* out) const;
  void backward(const int* ids, int batch, int seq, const float* dout) const;
};

}  // namespace trident::tensor_parallel
