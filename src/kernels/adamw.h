#pragma once
namespace trident::kernels {

struct AdamWStep {
  float lr;
  float beta1;
  float beta2;
  float eps;
  float weight_decay;  // applied only where the caller says the tensor decays
  long step;           // 1-based, for bias correction
  float grad_scale;    // gradient multiplier (clipping)
};

// Fused AdamW over one contiguous range: decoupled weight decay, bias-corrected moments.
void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, long n,
                  const AdamWStep& step, bool decay);

// Sum of squares in double, over fixed-size chunks: deterministic for any thread count.
double sum_of_squares(const float* x, long n);

}  // namespace trident::kernels
