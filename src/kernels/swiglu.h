#pragma once
// SwiGLU (Shazeer 2020): act = silu(gate) * up, with fc1's output row laid out as
// [gate (cols) | up (cols)] — each tensor-parallel rank's fc1 shard holds the matching
// gate and up rows, so the pair never crosses ranks.
#include "kernels/low_precision.h"

namespace trident::kernels {

// pre: [rows, 2 * cols]; bias (may be null) is added into pre first and kept there for
// backward; act: [rows, cols] (bf16 in bf16 runs: it only feeds fc2's products).
void bias_swiglu_forward(float* pre, const float* bias, const GemmOperandBuffer& act, int rows,
                         int cols);
void bias_swiglu_forward(float* pre, const float* bias, float* act, int rows, int cols);

// d_act: [rows, cols] = dL/d(act). pre becomes dL/d(pre) in place, [rows, 2 * cols]: the
// gate's and up's gradients in one pass over the pair.
void swiglu_backward_inplace(const float* d_act, float* pre, int rows, int cols);

// The same with fc1's bias and the backward products' operand: d(pre) of both halves in
// one pass, into pre (d16 null) or rounded to bf16 into d16 [rows, 2 * cols] (pre is then
// left as it was); dbias (may be null) += its column sums, [gate | up].
void swiglu_bias_backward(const float* d_act, float* pre, float* dbias, int rows, int cols,
                          bf16_t* d16);

float silu_scalar(float x);

}  // namespace trident::kernels
