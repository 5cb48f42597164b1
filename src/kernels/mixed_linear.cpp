#include "kernels/mixed_linear.h"

namespace trident::kernels {

void mixed_linear_forward(const LinearPrecision& p, const float* x, WeightOperand w, float* y,
                          int rows, int in, int out) {
  const long n = (long)rows * in;
  switch (p.precision) {
    case Precision::kFp32:
      linear_forward(x, w.fp32, y, rows, in, out);
      return;
    case Precision::kBf16:
      to_bf16(x, p.scratch.act16, n);
      gemm_bf16(Trans::kNo, Trans::kYes, rows, out, in, p.scratch.act16, in, w.low, in, 0.f, y,
                out);
      return;
    case Precision::kFp16:
      round_through_fp16(x, p.scratch.act32, n);
      from_fp16(w.low, p.scratch.weight32, (long)out * in);
      linear_forward(p.scratch.act32, p.scratch.weight32, y, rows, in, out);
      return;
  }
}

void mixed_linear_backward(const LinearPrecision& p, const float* dy, const float* x,
                           WeightOperand w, float* dx, float* dw, int rows, int in, int out) {
  const long n_in = (long)rows * in, n_out = (long)rows * out;
  switch (p.precision) {
    case Precision::kFp32:
      linear_backward_input(dy, w.fp32, dx, rows, in, out, false);
      linear_backward_weight(dy, x, dw, rows, in, out);
      return;
    case Precision::kBf16: {
      bf16_t *dy16 = p.scratch.act16, *x16 = p.scratch.in16;
      to_bf16(dy, dy16, n_out);
      to_bf16(x, x16, n_in);
      gemm_bf16(Trans::kNo, Trans::kNo, rows, in, out, dy16, out, w.low, in, 0.f, dx, in);
      gemm_bf16(Trans::kYes, Trans::kNo, out, in, rows, dy16, out, x16, in, 1.f, dw, in);
      return;
    }
    case Precision::kFp16: {
      float *dy_r = p.scratch.act32, *x_r = p.scratch.in32, *w_r = p.scratch.weight32;
      round_through_fp16(dy, dy_r, n_out);
      round_through_fp16(x, x_r, n_in);
      from_fp16(w.low, w_r, (long)out * in);
      linear_backward_input(dy_r, w_r, dx, rows, in, out, false);
      linear_backward_weight(dy_r, x_r, dw, rows, in, out);
      return;
    }
  }
}

}  // namespace trident::kernels
