#pragma once
// Row-major single-precision GEMM: C = alpha * op(A) * op(B) + beta * C.
// Every matrix product in trident goes through here, so the BLAS backend is
// chosen in one place: oneDNN on AVX-512 CPUs, BLIS before them (CMakeLists.txt says why;
// bench/gemm_libraries.sh measures them).
namespace trident::kernels {

enum class Trans { kNo, kYes };

void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);

// y[rows, out] = x[rows, in] * w[out, in]^T (+ y if accumulate): a Linear layer's forward.
void linear_forward(const float* x, const float* w, float* y, int rows, int in, int out,
                    bool accumulate = false);
// dx[rows, in] (+)= dy[rows, out] * w[out, in]
void linear_backward_input(const float* dy, const float* w, float* dx, int rows, int in, int out,
                           bool accumulate);
// dw[out, in] (+)= dy[rows, out]^T * x[rows, in] (= when not accumulate)
void linear_backward_weight(const float* dy, const float* x, float* dw, int rows, int in, int out,
                            bool accumulate = true);

}  // namespace trident::kernels
