#pragma once
// RMSNorm of each attention head on its own (Qwen3's q_norm / k_norm, Megatron's
// --qk-layernorm): the head_dim values of one head of one token are scaled by their own
// 1 / sqrt(mean(x^2) + eps) and by a weight of head_dim shared by every head. The heads sit
// in the projections' output as QkvLayout describes: `heads` consecutive heads per row, rows
// `stride` floats apart. Statistics in fp32.
namespace trident::kernels {

struct HeadRows {
  long rows = 0;
  long stride = 0;  // floats from one token's heads to the next's
  int heads = 0;
  int head_dim = 0;
};

// y = x * rstd * weight, in place when y == x; rstd [rows, heads] is kept for backward
// unless null.
void head_rmsnorm_forward(const float* x, float* y, const HeadRows& s, const float* weight,
                          float eps, float* rstd);

// d (in place: dL/dy on entry, dL/dx on return) through the norm of the heads of x (the
// input forward saw); dweight += sum over rows and heads of dy * x * rstd, summed in fixed
// row chunks so the result does not depend on the thread count.
void head_rmsnorm_backward(float* d, const float* x, const HeadRows& s, const float* weight,
                           const float* rstd, float* dweight);

}  // namespace trident::kernels
