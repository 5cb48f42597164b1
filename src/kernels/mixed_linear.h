#pragma once
// A Linear layer's three matrix products in the training precision. fp32 calls sgemm
// directly. bf16 rounds the activation operand (x, or dy) to bf16 in planned scratch and
// multiplies with the weight's bf16 copy on oneDNN's bf16 kernels, accumulating in fp32.
// fp16 rounds x, dy and the weight through fp16 (so overflow gives inf, as fp16 hardware
// would) and multiplies in fp32: numerically fp16, but no faster, on a CPU without FP16
// arithmetic. Weight gradients are always accumulated in fp32.
#include <cstdint>

#include "core/deferred_zero.h"
#include "kernels/low_precision.h"

namespace trident::kernels {

class WeightGradStore;  // kernels/weight_grad_store.h

// Where the rounded operands go; sized by the model's memory plan.
struct LinearScratch {
  std::uint16_t* act16 = nullptr;  // bf16 activation operand (x or dy) of the largest layer
  std::uint16_t* in16 = nullptr;   // bf16 layer input for the weight gradient
  float* act32 = nullptr;          // fp16 path: the same two operands rounded, in fp32
  float* in32 = nullptr;
  float* weight32 = nullptr;  // fp16 path: the weight expanded from its fp16 copy
  // bf16 path: a layer's fresh weight gradient, added to the accumulated one afterwards (the
  // faster inner-product kernels overwrite); the step's first product into a gradient whose
  // zeroing was deferred writes it directly. Larger weights (the output layer) accumulate in
  // place through gemm_bf16.
  float* weight_grad32 = nullptr;
  long weight_grad32_floats = 0;
};

struct LinearPrecision {
  Precision precision = Precision::kFp32;
  LinearScratch scratch;
  // Generation: forward products of at most kSkinnyMaxRows rows stream the weight once
  // (skinny_linear.h) instead of going through the GEMM library.
  bool skinny_forward = false;
  // Zero-bubble schedules: while this store records (a micro-batch's B), backward products
  // leave dW to the store's replay (its W).
  WeightGradStore* deferred = nullptr;
  // Weight gradients whose zeroing waits for their first product (Parameters::defer_zeroing):
  // that product writes dW instead of adding to it.
  DeferredZero* deferred_zero = nullptr;
};

// The fp32 pointer of an operand that must be fp32; throws for a bf16 one.
const float* fp32_operand(GemmOperand x);

// The output gradient as the backward products take it, with the bias gradient (when dbias
// is given) summed in the same pass: bf16 runs round dy into the scratch while summing.
GemmOperand output_grad_operand(const LinearPrecision& p, const float* dy, float* dbias, int rows,
                                int out);

// The same for a linear followed by GeLU: d_act = d(GeLU(pre)) turns into d(pre) in the
// pass that sums the bias gradient (in place, or bf16 into the scratch).
GemmOperand gelu_output_grad_operand(const LinearPrecision& p, float* d_act, const float* pre,
                                     float* dbias, int rows, int out);

// The same for a linear followed by SwiGLU (out = 2 * cols, [gate | up]): d_act [rows, cols]
// = d(SwiGLU(pre)) turns into d(pre) in one pass with the bias gradient (in place in pre,
// or bf16 into the scratch).
GemmOperand swiglu_output_grad_operand(const LinearPrecision& p, const float* d_act, float* pre,
                                       float* dbias, int rows, int cols);

// A weight [out, in] as the products see it: fp32 master values and, in bf16 / fp16 runs,
// its 16-bit copy.
struct WeightOperand {
  const float* fp32;
  const std::uint16_t* low;
  const void* panels = nullptr;  // generation's decode copy (skinny_linear.h), if any
};

// y[rows, out] = x[rows, in] * w^T
void mixed_linear_forward(const LinearPrecision& p, GemmOperand x, WeightOperand w, float* y,
                          int rows, int in, int out);
// dx[rows, in] = dy * w; dw[out, in] += dy^T * x (deferred while p.deferred records)
void mixed_linear_backward(const LinearPrecision& p, GemmOperand dy, GemmOperand x, WeightOperand w,
                           float* dx, float* dw, int rows, int in, int out);
// dw[out, in] += dy^T * x alone, with dy and x as that product takes them: bf16 (both) in
// bf16 runs, fp32 (fp16-rounded in fp16 runs) otherwise; dw = dy^T * x when dw is a span
// p.deferred_zero holds pending (the step's first product into it).
void mixed_linear_backward_weight(const LinearPrecision& p, GemmOperand dy, GemmOperand x,
                                  float* dw, int rows, int in, int out);

}  // namespace trident::kernels
