#include "kernels/mixed_linear.h"

#include <stdexcept>

#include "kernels/elementwise.h"
#include "kernels/linear_bf16.h"
#include "kernels/skinny_linear.h"
#include "kernels/swiglu.h"
#include "kernels/weight_grad_store.h"

namespace trident::kernels {

namespace {
// x as bf16: as stored, or rounded into the scratch.
const bf16_t* bf16_operand(GemmOperand x, bf16_t* scratch, long n) {
  if (x.bf16) return x.bf16;
  to_bf16(x.fp32, scratch, n);
  return scratch;
}

}  // namespace

const float* fp32_operand(GemmOperand x) {
  if (!x.fp32) throw std::logic_error("a bf16-stored operand where fp32 is needed");
  return x.fp32;
}

GemmOperand output_grad_operand(const LinearPrecision& p, const float* dy, float* dbias, int rows,
                                int out) {
  if (p.precision != Precision::kBf16) {
    if (dbias) bias_backward(dy, dbias, rows, out);
    return dy;
  }
  if (dbias)
    bias_backward(dy, dbias, rows, out, p.scratch.act16);
  else
    to_bf16(dy, p.scratch.act16, (long)rows * out);
  return p.scratch.act16;
}

GemmOperand gelu_output_grad_operand(const LinearPrecision& p, float* d_act, const float* pre,
                                     float* dbias, int rows, int out) {
  if (p.precision != Precision::kBf16) {
    gelu_bias_backward(pre, d_act, dbias, rows, out);
    return d_act;
  }
  gelu_bias_backward(pre, d_act, dbias, rows, out, p.scratch.act16);
  return p.scratch.act16;
}

GemmOperand swiglu_output_grad_operand(const LinearPrecision& p, const float* d_act, float* pre,
                                       float* dbias, int rows, int cols) {
  if (p.precision != Precision::kBf16) {
    swiglu_bias_backward(d_act, pre, dbias, rows, cols, nullptr);
    return pre;
  }
  swiglu_bias_backward(d_act, pre, dbias, rows, cols, p.scratch.act16);
  return p.scratch.act16;
}

void mixed_linear_forward(const LinearPrecision& p, GemmOperand input, WeightOperand w, float* y,
                          int rows, int in, int out) {
  const long n = (long)rows * in;
  const bool skinny = p.skinny_forward && skinny_linear_available(p.precision, rows);
  // One row reads w at full bandwidth in its own layout already (no broadcasts needed).
  const bool panels = skinny && w.panels && rows > 1;
  switch (p.precision) {
    case Precision::kFp32:
      if (panels)
        return panel_linear_forward(fp32_operand(input), static_cast<const float*>(w.panels), y,
                                    rows, in, out);
      if (skinny) return skinny_linear_forward(fp32_operand(input), w.fp32, y, rows, in, out);
      linear_forward(fp32_operand(input), w.fp32, y, rows, in, out);
      return;
    case Precision::kBf16:
      if (panels)
        return panel_linear_forward_bf16(bf16_operand(input, p.scratch.act16, n),
                                         static_cast<const bf16_t*>(w.panels), y, rows, in, out);
      if (skinny)
        return skinny_linear_forward_bf16(bf16_operand(input, p.scratch.act16, n), w.low, y, rows,
                                          in, out);
      linear_forward_bf16(bf16_operand(input, p.scratch.act16, n), w.low, y, rows, in, out);
      return;
    case Precision::kFp16:
      round_through_fp16(fp32_operand(input), p.scratch.act32, n);
      from_fp16(w.low, p.scratch.weight32, (long)out * in);
      linear_forward(p.scratch.act32, p.scratch.weight32, y, rows, in, out);
      return;
  }
}

void mixed_linear_backward_weight(const LinearPrecision& p, GemmOperand dy, GemmOperand input,
                                  float* dw, int rows, int in, int out) {
  const long weight = (long)out * in;
  // The step's first product into a gradient left unzeroed writes it: 0 + s is s exactly.
  const bool first = p.deferred_zero && p.deferred_zero->claim(dw, weight);
  if (first && rows == 0) return fill(dw, 0.f, weight);
  if (!dy.bf16) {
    linear_backward_weight(fp32_operand(dy), fp32_operand(input), dw, rows, in, out, !first);
    return;
  }
  if (!input.bf16) throw std::logic_error("bf16 weight gradient with an fp32 input");
  if (weight > p.scratch.weight_grad32_floats) {
    gemm_bf16(Trans::kYes, Trans::kNo, out, in, rows, dy.bf16, out, input.bf16, in,
              first ? 0.f : 1.f, dw, in);
  } else if (first) {
    linear_backward_weight_bf16(dy.bf16, input.bf16, dw, rows, in, out);
  } else {
    linear_backward_weight_bf16(dy.bf16, input.bf16, p.scratch.weight_grad32, rows, in, out);
    accumulate(dw, p.scratch.weight_grad32, weight);
  }
}

namespace {
bool deferring(const LinearPrecision& p) {
  return p.deferred && p.deferred->recording();
}

void linear_backward_input_only(const LinearPrecision& p, GemmOperand dy, WeightOperand w,
                                float* dx, int rows, int in, int out) {
  const long n_out = (long)rows * out;
  switch (p.precision) {
    case Precision::kFp32:
      linear_backward_input(fp32_operand(dy), w.fp32, dx, rows, in, out, false);
      return;
    case Precision::kBf16:
      linear_backward_input_bf16(bf16_operand(dy, p.scratch.act16, n_out), w.low, dx, rows, in,
                                 out);
      return;
    case Precision::kFp16:
      round_through_fp16(fp32_operand(dy), p.scratch.act32, n_out);
      from_fp16(w.low, p.scratch.weight32, (long)out * in);
      linear_backward_input(p.scratch.act32, p.scratch.weight32, dx, rows, in, out, false);
      return;
  }
}
}  // namespace

// While deferring, x goes to the store as given: W reads (and rounds) it there, B does not.
void mixed_linear_backward(const LinearPrecision& p, GemmOperand dy, GemmOperand input,
                           WeightOperand w, float* dx, float* dw, int rows, int in, int out) {
  const long n_in = (long)rows * in, n_out = (long)rows * out;
  if (!dw) {  // a frozen weight (LoRA's base): no weight gradient at all, dx alone
    linear_backward_input_only(p, dy, w, dx, rows, in, out);
    return;
  }
  switch (p.precision) {
    case Precision::kFp32:
      linear_backward_input(fp32_operand(dy), w.fp32, dx, rows, in, out, false);
      if (deferring(p))
        p.deferred->record(p, dy, input, dw, rows, in, out);
      else
        mixed_linear_backward_weight(p, dy, input, dw, rows, in, out);
      return;
    case Precision::kBf16: {
      const bf16_t* dy16 = bf16_operand(dy, p.scratch.act16, n_out);
      linear_backward_input_bf16(dy16, w.low, dx, rows, in, out);
      if (deferring(p))
        p.deferred->record(p, dy16, input, dw, rows, in, out);
      else
        mixed_linear_backward_weight(p, dy16, bf16_operand(input, p.scratch.in16, n_in), dw, rows,
                                     in, out);
      return;
    }
    case Precision::kFp16: {
      float *dy_r = p.scratch.act32, *x_r = p.scratch.in32, *w_r = p.scratch.weight32;
      round_through_fp16(fp32_operand(dy), dy_r, n_out);
      from_fp16(w.low, w_r, (long)out * in);
      linear_backward_input(dy_r, w_r, dx, rows, in, out, false);
      if (deferring(p)) {
        p.deferred->record(p, dy_r, input, dw, rows, in, out);
      } else {
        round_through_fp16(fp32_operand(input), x_r, n_in);
        mixed_linear_backward_weight(p, dy_r, x_r, dw, rows, in, out);
      }
      return;
    }
  }
}

}  // namespace trident::kernels
