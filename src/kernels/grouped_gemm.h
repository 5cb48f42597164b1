#pragma once
// The experts' linear layers as one grouped product: the rows of expert e are contiguous,
// [offsets[e], offsets[e + 1]) of x (the order moe_permute gives), and each block is
// multiplied by that expert's own weight [out, in] through the Linear entry points of
// kernels/gemm.h. An expert that received no row is skipped: its output has no rows and
// its weight gradient is left as it was.
#include "kernels/low_precision.h"

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

// The same products with bf16 operands (the weights' bf16 copies, x and dy rounded by the
// caller) and fp32 results, as kernels/mixed_linear.h's bf16 path: oneDNN caches a kernel
// per shape, and an expert's row count changes every micro-batch, so each expert's block is
// cut into blocks of kBf16BlockRows rows and a remainder of powers of two (a bounded set
// of shapes, at most log2(kBf16BlockRows) + 1 more products per expert).
constexpr long kBf16BlockRows = 256;
// y[rows, out] = x[rows, in] * w[e]^T block by block.
void grouped_linear_forward(const ExpertGroups& g, const bf16_t* x, const bf16_t* const* w,
                            float* y);
// dx[rows, in] (+)= dy[rows, out] * w[e] block by block.
void grouped_linear_backward_input(const ExpertGroups& g, const bf16_t* dy, const bf16_t* const* w,
                                   float* dx, bool accumulate = false);
// dw[e][out, in] += dy_e^T * x_e (fp32 accumulation) for every expert with rows.
void grouped_linear_backward_weight(const ExpertGroups& g, const bf16_t* dy, const bf16_t* x,
                                    float* const* dw);

}  // namespace trident::kernels
