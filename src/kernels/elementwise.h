#pragma once
// Memory-bound element-wise kernels (bias, GeLU, residual), threaded with OpenMP.
#include "kernels/low_precision.h"

namespace trident::kernels {

// y[r, c] += bias[c]
void add_bias(float* y, const float* bias, int rows, int cols);
// out[r, c] = a[r, c] + y[r, c] + bias[c]: row-parallel linear's bias fused with the residual.
void bias_residual_add(const float* a, const float* y, const float* bias, float* out, int rows,
                       int cols);
// dbias[c] += sum_r dy[r, c]; summed in fixed row chunks so the result is thread-count independent.
// With dy16, dy is also written rounded to bf16 in the same pass (the backward GEMMs' operand).
void bias_backward(const float* dy, float* dbias, int rows, int cols, bf16_t* dy16 = nullptr);

// GeLU, tanh approximation (GPT-2's "gelu_new"); see fast_math.h.
float gelu_scalar(float x);
float gelu_grad_scalar(float x);
// pre[r, c] += bias[c]; out = gelu(pre). Keeps pre for the backward pass.
void bias_gelu_forward(float* pre, const float* bias, float* out, int rows, int cols);
// The same, out rounded to bf16 (it only feeds fc2's matrix products).
void bias_gelu_forward(float* pre, const float* bias, bf16_t* out, int rows, int cols);
void bias_gelu_forward(float* pre, const float* bias, const GemmOperandBuffer& out, int rows,
                       int cols);
// Megatron's bias-GeLU fusion, backward: d (= d(GeLU(pre))) becomes d(pre) = d * gelu'(pre),
// summed into dbias in the same pass and written in place, or with d16 only as bf16 (the
// backward GEMMs' operand).
void gelu_bias_backward(const float* pre, float* d, float* dbias, int rows, int cols,
                        bf16_t* d16 = nullptr);
// dinout *= gelu'(pre), in place.
void gelu_backward_inplace(const float* pre, float* dinout, long n);

void fill(float* y, float value, long n);
// y[i] += x[i]
void accumulate(float* y, const float* x, long n);

}  // namespace trident::kernels
