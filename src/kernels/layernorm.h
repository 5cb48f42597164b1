#pragma once
namespace trident::kernels {

// y = (x - mean) * rstd * weight + bias over the last dimension; saves mean and rstd.
void layernorm_forward(const float* x, const float* weight, const float* bias, float* y,
                       float* mean, float* rstd, int rows, int cols, float eps);

// dx (+)= d/dx; dweight += ..., dbias += ... (parameter grads summed in fixed row chunks,
// so results do not depend on the thread count).
void layernorm_backward(const float* dy, const float* x, const float* weight, const float* mean,
                        const float* rstd, float* dx, float* dweight, float* dbias, int rows,
                        int cols, bool accumulate_dx);

}  // namespace trident::kernels
