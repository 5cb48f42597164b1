#include "kernels/gemm.h"

#include <omp.h>

#include <stdexcept>
#include <string>

#if defined(TRIDENT_GEMM_BLIS)
#include <blis.h>
#else
#include <oneapi/dnnl/dnnl.h>
#endif

namespace trident::kernels {

namespace {

// C = beta C: a product with an empty inner dimension (sgemm implementations disagree on
// whether they touch C then).
void scale(int m, int n, float beta, float* c, int ldc) {
  if (beta == 1.f) return;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      c[(long)i * ldc + j] = beta == 0.f ? 0.f : beta * c[(long)i * ldc + j];
}

#if defined(TRIDENT_GEMM_BLIS)
// BLIS's threads wait for each other spinning, never sleeping: where the cores are shared
// (ranks or tests side by side) a waiting thread burns the time its partner needs. A product
// under this many multiply-adds (~0.1 ms on one core) therefore runs on one thread; BLIS's
// sums do not depend on its thread count, so this changes no result.
constexpr double kThreadedMacs = 1 << 23;

// Row-major operands are BLIS matrices with row stride ld and column stride 1. The thread
// count is this call's own (an rntm, not BLIS's global setting): the caller's OpenMP threads,
// or one inside a parallel region or for a small product.
void backend_sgemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
                   int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  const bool threaded = !omp_in_parallel() && (double)m * n * k >= kThreadedMacs;
  rntm_t rntm = BLIS_RNTM_INITIALIZER;
  bli_rntm_set_num_threads(threaded ? omp_get_max_threads() : 1, &rntm);
  bli_sgemm_ex(trans_a == Trans::kYes ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
               trans_b == Trans::kYes ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, m, n, k, &alpha,
               const_cast<float*>(a), lda, 1, const_cast<float*>(b), ldb, 1, &beta, c, ldc, 1,
               nullptr, &rntm);
}
#else
void backend_sgemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
                   int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  dnnl_status_t status =
      dnnl_sgemm(trans_a == Trans::kYes ? 'T' : 'N', trans_b == Trans::kYes ? 'T' : 'N', m, n, k,
                 alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    throw std::runtime_error("dnnl_sgemm failed with status " + std::to_string(status));
}
#endif

}  // namespace

void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale(m, n, beta, c, ldc);
  backend_sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void linear_forward(const float* x, const float* w, float* y, int rows, int in, int out,
                    bool accumulate) {
  gemm(Trans::kNo, Trans::kYes, rows, out, in, 1.f, x, in, w, in, accumulate ? 1.f : 0.f, y, out);
}

void linear_backward_input(const float* dy, const float* w, float* dx, int rows, int in, int out,
                           bool accumulate) {
  gemm(Trans::kNo, Trans::kNo, rows, in, out, 1.f, dy, out, w, in, accumulate ? 1.f : 0.f, dx, in);
}

void linear_backward_weight(const float* dy, const float* x, float* dw, int rows, int in, int out,
                            bool accumulate) {
  gemm(Trans::kYes, Trans::kNo, out, in, rows, 1.f, dy, out, x, in, accumulate ? 1.f : 0.f, dw, in);
}

}  // namespace trident::kernels
