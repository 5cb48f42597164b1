#pragma once
// RMSNorm (Zhang & Sennrich 2019), the Llama family's normalization: y = x * rstd * weight
// with rstd = 1 / sqrt(mean(x^2) + eps); no mean subtraction, no bias. Statistics in fp32.
#include "kernels/low_precision.h"

namespace trident::kernels {

// Saves rstd for backward; y in fp32 or (bf16 runs, where it only feeds matrix products)
// rounded to bf16 as it is written.
void rmsnorm_forward(const float* x, const float* weight, const GemmOperandBuffer& y, float* rstd,
                     int rows, int cols, float eps);
void rmsnorm_forward(const float* x, const float* weight, float* y, float* rstd, int rows, int cols,
                     float eps);

// dx (+)= d/dx; dweight += sum_r dy * x * rstd (summed in fixed row chunks, so the result
// does not depend on the thread count).
void rmsnorm_backward(const float* dy, const float* x, const float* weight, const float* rstd,
                      float* dx, float* dweight, int rows, int cols, bool accumulate_dx);

}  // namespace trident::kernels
