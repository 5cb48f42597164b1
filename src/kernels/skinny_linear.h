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
//
// The panel forms below take w repacked once (generation's decode copy): blocks of 16
// outputs, each stored input by input, so one 64-byte load holds 16 outputs' weights for one
// input and each row's x[i] is a broadcast: no horizontal sums, and x's loads are 4 bytes.
// Measured on the lm-head shape (50304 x 768, 8 rows, 2 threads, weights streamed from
// memory): fp32 4.4 ms against the row form's 6.9 (1 row: 3.6); bf16 1.7 against 3.9 (1 row:
// 1.5) - close to reading the weights once whatever the rows.
#include "kernels/low_precision.h"

namespace trident::kernels {

constexpr int kSkinnyMaxRows = 16;

// True when this build has the kernel for the precision (AVX-512, bf16 AVX512_BF16; or
// AVX2 and FMA, skinny_linear_avx2.h) and rows <= kSkinnyMaxRows.
bool skinny_linear_available(Precision p, int rows);

void skinny_linear_forward(const float* x, const float* w, float* y, int rows, int in, int out);
void skinny_linear_forward_bf16(const bf16_t* x, const bf16_t* w, float* y, int rows, int in,
                                int out);

// Panel layout. fp32: [ceil(out / 16)][in][16]. bf16: [ceil(out / 16)][ceil(in / 2)][16][2]
// (vdpbf16ps takes pairs of neighbouring inputs). Outputs past `out` (and the odd input's
// partner) are zero.
long panel_elements(Precision p, int out, int in);
void pack_panels(const float* w, int out, int in, float* panels);
void pack_panels_bf16(const bf16_t* w, int out, int in, bf16_t* panels);

void panel_linear_forward(const float* x, const float* panels, float* y, int rows, int in, int out);
void panel_linear_forward_bf16(const bf16_t* x, const bf16_t* panels, float* y, int rows, int in,
                               int out);

}  // namespace trident::kernels
