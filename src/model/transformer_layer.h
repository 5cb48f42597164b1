#pragma once
// One pre-LayerNorm GPT-2 block: x + Attn(LN1(x)), then + MLP(LN2(.)), built from the
// tensor-parallel linears so the same code runs at any tensor-parallel size.
#include "kernels/attention.h"
#include "model/parameters.h"
#include "tensor_parallel/layers.h"

namespace trident {

// What one layer keeps from forward for backward (one micro-batch).
struct LayerActivations {
  float *ln1_out, *ln1_mean, *ln1_rstd;
  float *qkv, *attn_out, *attn_lse;
  float* residual1;
  float *ln2_out, *ln2_mean, *ln2_rstd;
  float *fc1_pre, *fc1_act;
  float* output;
};

// Reused by every layer; nothing in it survives a layer's call.
struct LayerScratch {
  float* row_out;   // [tokens, h]
  float* d_hidden;  // [tokens, h]
  float* d_ffn;     // [tokens, f / t]
  float* d_attn;    // [tokens, h / t]
  float* d_qkv;     // [tokens, 3h / t]
};

struct LayerDims {
  int hidden;
  int heads_local;
  int head_dim;
  int ffn_local;
  float eps;
};

class TransformerLayer {
 public:
  TransformerLayer(const LayerDims& dims, Parameters& params, int index, comm::Communicator& tp);
  void forward(const float* x, const LayerActivations& a, const LayerScratch& w, int batch,
               int seq) const;
  // d_residual holds dL/d(output) on entry and dL/dx on return.
  void backward(const float* x, const LayerActivations& a, float* d_residual, const LayerScratch& w,
                int batch, int seq) const;

 private:
  LayerDims dims_;
  ParamRef ln1_weight_, ln1_bias_, ln2_weight_, ln2_bias_;
  tensor_parallel::ColumnParallelLinear qkv_, fc1_;
  tensor_parallel::RowParallelLinear proj_, fc2_;
};

}  // namespace trident
