#pragma once
// y[rows, out] = x[rows, in] * w[out, in]^T for a few rows (generation's decode steps:
// one row per running sequence). Such products are bound by reading w, so this streams w
// exactly once: each thread takes a range of w's rows and forms all `rows` dot products with
// every w row while it is in registers. Measured on gpt2-small decode (interleaved runs):
// fp32 batch 1 is 15-25% faster than the GEMM library's path (80-94 vs 67-75 tokens/s); at
// batch 8, and in bf16, the two are within noise. At 8 rows it is bound by loads and FMA
// issue rather than by w's bytes (the lm-head product takes 2.6x the 1-row time), so a
// register-blocked kernel (x held in registers across several w rows, w prefetched) is what
// would bring batch 8 near the bandwidth floor.
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
