#pragma once
// The skinny kernels of skinny_linear.h for CPUs with AVX2 and FMA but without the AVX-512
// instructions the main ones use (fp32: AVX512F; bf16: AVX512_BF16), e.g. a Zen 3. Without
// them a decode step's products went to the GEMM library, which on such a CPU runs a 1-row
// product on one thread, and in bf16 first widened every weight to fp32 (three times the
// bytes of reading them once). The same layouts and contracts as skinny_linear.h; bf16
// operands are widened exactly in registers and multiplied in fp32, as vdpbf16ps would.
#include "kernels/low_precision.h"

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
#define TRIDENT_SKINNY_AVX2_FP32 1
#endif
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512BF16__)
#define TRIDENT_SKINNY_AVX2_BF16 1
#endif

namespace trident::kernels::avx2 {

void skinny_linear_forward(const float* x, const float* w, float* y, int rows, int in, int out);
void skinny_linear_forward_bf16(const bf16_t* x, const bf16_t* w, float* y, int rows, int in,
                                int out);
void panel_linear_forward(const float* x, const float* panels, float* y, int rows, int in, int out);
void panel_linear_forward_bf16(const bf16_t* x, const bf16_t* panels, float* y, int rows, int in,
                               int out);

}  // namespace trident::kernels::avx2
