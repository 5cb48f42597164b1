#pragma once
#include <cstdint>

#include "kernels/low_precision.h"

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
// low, when given, receives the new values rounded to bf16 (or fp16): the 16-bit copy the
// next forward multiplies with, written while the value is still in a register.
void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, long n,
                  const AdamWStep& step, bool decay, std::uint16_t* low = nullptr,
                  Precision low_precision = Precision::kBf16);

// Sum of squares in double, over fixed-size chunks: deterministic for any thread count.
double sum_of_squares(const float* x, long n);

}  // namespace trident::kernels
