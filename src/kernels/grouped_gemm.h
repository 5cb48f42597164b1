#pragma once
// The experts' linear layers as one grouped product: the rows of expert e are contiguous,
// [offsets[e], offsets[e + 1]) of x (the order moe_permute gives), and each block is
// multiplied by that expert's own weight [out, in] through the Linear entry points of
// kernels/gemm.h. An expert that received no row is skipped: its output has no rows and
// its weight gradient is left as it was.
namespace trident::kernels {

// Which rows belong to which expert, and the experts' weights (w[e]: [out, in], row-major).
struct ExpertGroups {
  const long* offsets = nullptr;  // [experts + 1], ascending, offsets[0] = 0
  int experts = 0;
  int in = 0, out = 0;
};

// y[rows, out] = x[rows, in] * w[e]^T block by block (+ y when accumulate).
void grouped_linear_forward(const ExpertGroups& g, const float* x, const float* const* w, float* y,
                            bool accumulate = false);
// dx[rows, in] (+)= dy[rows, out] * w[e] block by block.
void grouped_linear_backward_input(const ExpertGroups& g, const float* dy, const float* const* w,
                                   float* dx, bool accumulate = false);
// dw[e][out, in] += dy_e^T * x_e for every expert with rows.
void grouped_linear_backward_weight(const ExpertGroups& g, const float* dy, const float* x,
                                    float* const* dw);

}  // namespace trident::kernels
