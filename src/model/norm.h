#pragma once
// The block's normalization, LayerNorm or RMSNorm (--normalization), behind one call so the
// layers and the final norm do not branch on it. RMSNorm has no bias and no mean: its
// `mean` buffer is left unused.
#include "kernels/layernorm.h"
#include "kernels/rmsnorm.h"
#include "parameters/parameters.h"

namespace trident {

struct Norm {
  ParamRef weight{};
  ParamRef bias{};  // numel 0 for RMSNorm
  bool rms = false;
  float eps = 1e-5f;

  void forward(const float* x, const kernels::GemmOperandBuffer& y, float* mean, float* rstd,
               int rows, int cols) const {
    if (rms)
      kernels::rmsnorm_forward(x, weight.value, y, rstd, rows, cols, eps);
    else
      kernels::layernorm_forward(x, weight.value, bias.value, y, mean, rstd, rows, cols, eps);
  }
  void backward(const float* dy, const float* x, const float* mean, const float* rstd, float* dx,
                int rows, int cols, bool accumulate_dx) const {
    if (rms)
      kernels::rmsnorm_backward(dy, x, weight.value, rstd, dx, weight.grad, rows, cols,
                                accumulate_dx);
    else
      kernels::layernorm_backward(dy, x, weight.value, mean, rstd, dx, weight.grad, bias.grad, rows,
                                  cols, accumulate_dx);
  }
};

// The norm named `prefix` ("layers.3.input_layernorm", "final_layernorm") of a model.
Norm make_norm(Parameters& params, const std::string& prefix, const ModelConfig& config);

}  // namespace trident
