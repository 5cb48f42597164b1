#pragma once
// A Linear layer's three bf16 products on oneDNN's inner-product primitives (bf16 operands,
// fp32 results). On this CPU their gemm:jit kernels run the layer shapes 10-35% faster than
// the matmul primitive's brgemm kernels (gpt2-small, 2 threads: forward 820-880 vs 690-755
// GFLOP/s, input gradient 780-870 vs 640-775, weight gradient 790-840 vs 580-655), so the
// layers use these and gemm_bf16 serves the other shapes. Without AVX-512 all three widen
// their operands (kernels/bf16_widened.h).
#include "kernels/low_precision.h"

namespace trident::kernels {

// y[rows, out] = x[rows, in] w^T, w [out, in]
void linear_forward_bf16(const bf16_t* x, const bf16_t* w, float* y, int rows, int in, int out);
// dx[rows, in] = dy[rows, out] w
void linear_backward_input_bf16(const bf16_t* dy, const bf16_t* w, float* dx, int rows, int in,
                                int out);
// dw[out, in] = dy^T x, overwritten (the primitive does not accumulate)
void linear_backward_weight_bf16(const bf16_t* dy, const bf16_t* x, float* dw, int rows, int in,
                                 int out);

}  // namespace trident::kernels
