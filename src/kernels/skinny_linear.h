#pragma once
// y[rows, out] = x[rows, in] * w[out, in]^T for a few rows (generation's decode steps:
// one row per running sequence). Such products are bound by reading w, so this streams w
// exactly once: each thread takes a range of w's rows and forms all `rows` dot products with
// every w row while it is in registers. General GEMM kernels instead pack w per call for a
// handful of rows (batch 8 ran at ~2.5x the time of batch 1, for 8x the work, before this).
#include "kernels/low_precision.h"

namespace trident::kernels {

constexpr int kSkinnyMaxRows = 16;

// True when this build has the kernel for the precision (AVX-512; bf16 needs AVX512_BF16)
// and rows <= kSkinnyMaxRows.
bool skinny_linear_available(Precision p, int rows);

void skinny_linear_forward(const float* x, const float* w, float* y, int rows, int in, int out);
void skinny_linear_forward_bf16(const bf16_t* x, const bf16_t* w, float* y, int rows, int in,
                                int out);

}  // namespace trident::kernels
