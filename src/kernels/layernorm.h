#pragma once
#include "kernels/low_precision.h"

namespace trident::kernels {

// y = (x - mean) * rstd * weight + bias over the last dimension; saves mean and rstd.
void layernorm_forward(const float* x, const float* weight, const float* bias, float* y,
                       float* mean, float* rstd, int rows, int cols, float eps);
// The same, y rounded to bf16 as it is written: in bf16 runs a LayerNorm output only feeds
// matrix products, which read it in bf16 (backward uses x, mean and rstd).
void layernorm_forward(const float* x, const float* weight, const float* bias, bf16_t* y,
                       float* mean, float* rstd, int rows, int cols, float eps);
// Into whichever of the two the buffer holds.
void layernorm_forward(const float* x, const float* weight, const float* bias,
                       const GemmOperandBuffer& y, float* mean, float* rstd, int rows, int cols,
                       float eps);

// dx (+)= d/dx; dweight += ..., dbias += ... (parameter grads summed in fixed row chunks,
// so results do not depend on the thread count).
void layernorm_backward(const float* dy, const float* x, const float* weight, const float* mean,
                        const float* rstd, float* dx, float* dweight, float* dbias, int rows,
                        int cols, bool accumulate_dx);

}  // namespace trident::kernels
