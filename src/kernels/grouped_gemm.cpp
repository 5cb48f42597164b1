#include "kernels/grouped_gemm.h"

#include "kernels/gemm.h"

namespace trident::kernels {

// Each block is one GEMM, threaded inside oneDNN. (Splitting the threads across experts
// instead would help when each expert's block is a few rows; that is a measured change
// for later, not a different result.)

void grouped_linear_forward(const ExpertGroups& g, const float* x, const float* const* w, float* y,
                            bool accumulate) {
  for (int e = 0; e < g.experts; ++e) {
    const long begin = g.offsets[e], rows = g.offsets[e + 1] - begin;
    if (rows <= 0) continue;
    linear_forward(x + begin * g.in, w[e], y + begin * g.out, (int)rows, g.in, g.out, accumulate);
  }
}

void grouped_linear_backward_input(const ExpertGroups& g, const float* dy, const float* const* w,
                                   float* dx, bool accumulate) {
  for (int e = 0; e < g.experts; ++e) {
    const long begin = g.offsets[e], rows = g.offsets[e + 1] - begin;
    if (rows <= 0) continue;
    linear_backward_input(dy + begin * g.out, w[e], dx + begin * g.in, (int)rows, g.in, g.out,
                          accumulate);
  }
}

void grouped_linear_backward_weight(const ExpertGroups& g, const float* dy, const float* x,
                                    float* const* dw) {
  for (int e = 0; e < g.experts; ++e) {
    const long begin = g.offsets[e], rows = g.offsets[e + 1] - begin;
    if (rows <= 0) continue;
    linear_backward_weight(dy + begin * g.out, x + begin * g.in, dw[e], (int)rows, g.in, g.out);
  }
}

}  // namespace trident::kernels
