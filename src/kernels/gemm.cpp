#include "kernels/gemm.h"

#include <oneapi/dnnl/dnnl.h>

#include <stdexcept>
#include <string>

namespace trident::kernels {

void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  dnnl_status_t status =
      dnnl_sgemm(trans_a == Trans::kYes ? 'T' : 'N', trans_b == Trans::kYes ? 'T' : 'N', m, n, k,
                 alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success)
    throw std::runtime_error("dnnl_sgemm failed with status " + std::to_string(status));
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
