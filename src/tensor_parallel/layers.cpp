#include "tensor_parallel/layers.h"

#include <algorithm>

#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/gemm.h"
#include "tensor_parallel/mappings.h"

namespace trident::tensor_parallel {

namespace {
const kernels::LinearPrecision kFp32{};
const kernels::LinearPrecision& or_fp32(const kernels::LinearPrecision* p) {
  return p ? *p : kFp32;
}
}  // namespace

void ColumnParallelLinear::forward(kernels::GemmOperand x, float* y, int rows,
                                   const LoraCall& lora_call) const {
  kernels::mixed_linear_forward(or_fp32(precision), x, {weight.value, weight.low, weight.panels}, y,
                                rows, in, out_local);
  if (lora.active()) lora.forward(x, y, rows, in, out_local, lora_call);
}

void ColumnParallelLinear::lora_backward(kernels::GemmOperand dy, kernels::GemmOperand x, float* dx,
                                         int rows, const LoraCall& lora_call) const {
  if (lora.active()) lora.backward_column(dy, x, dx, rows, in, out_local, *tp, lora_call);
}

void ColumnParallelLinear::backward(const float* dy, kernels::GemmOperand x, float* dx, int rows,
                                    const LoraCall& lora_call) const {
  backward_partial(dy, x, dx, rows, lora_call);
  if (!sequence_parallel) copy_to_region_backward(*tp, dx, (long)rows * in);
}

void ColumnParallelLinear::backward_through_gelu(float* d_act, const float* pre,
                                                 kernels::GemmOperand x, float* dx, int rows,
                                                 const LoraCall& lora_call) const {
  const kernels::GemmOperand dy =
      kernels::gelu_output_grad_operand(or_fp32(precision), d_act, pre, bias.grad, rows, out_local);
  kernels::mixed_linear_backward(or_fp32(precision), dy, x, {weight.value, weight.low}, dx,
                                 weight.grad, rows, in, out_local);
  lora_backward(dy, x, dx, rows, lora_call);
  if (!sequence_parallel) copy_to_region_backward(*tp, dx, (long)rows * in);
}

void ColumnParallelLinear::backward_through_swiglu(const float* d_act, float* pre,
                                                   kernels::GemmOperand x, float* dx, int rows,
                                                   const LoraCall& lora_call) const {
  const kernels::GemmOperand dy = kernels::swiglu_output_grad_operand(
      or_fp32(precision), d_act, pre, bias.grad, rows, out_local / 2);
  kernels::mixed_linear_backward(or_fp32(precision), dy, x, {weight.value, weight.low}, dx,
                                 weight.grad, rows, in, out_local);
  lora_backward(dy, x, dx, rows, lora_call);
  if (!sequence_parallel) copy_to_region_backward(*tp, dx, (long)rows * in);
}

void ColumnParallelLinear::backward_partial(kernels::GemmOperand dy, kernels::GemmOperand x,
                                            float* dx, int rows, const LoraCall& lora_call) const {
  if (bias.numel)  // the bias gradient and (bf16) the rounded dy in one pass
    dy = kernels::output_grad_operand(or_fp32(precision), kernels::fp32_operand(dy), bias.grad,
                                      rows, out_local);
  kernels::mixed_linear_backward(or_fp32(precision), dy, x, {weight.value, weight.low}, dx,
                                 weight.grad, rows, in, out_local);
  lora_backward(dy, x, dx, rows, lora_call);
}

void RowParallelLinear::forward(kernels::GemmOperand x, float* y, int rows,
                                const LoraCall& lora_call) const {
  kernels::mixed_linear_forward(or_fp32(precision), x, {weight.value, weight.low, weight.panels}, y,
                                rows, in_local, out);
  if (lora.active()) lora.forward(x, y, rows, in_local, out, lora_call);
  if (!sequence_parallel) reduce_from_region_forward(*tp, y, (long)rows * out);
}

void RowParallelLinear::backward(const float* dy, kernels::GemmOperand x, float* dx, int rows,
                                 const LoraCall& lora_call) const {
  const kernels::GemmOperand g =
      bias.numel ? kernels::output_grad_operand(or_fp32(precision), dy, bias.grad, rows, out) : dy;
  kernels::mixed_linear_backward(or_fp32(precision), g, x, {weight.value, weight.low}, dx,
                                 weight.grad, rows, in_local, out);
  if (lora.active()) lora.backward_row(g, x, dx, rows, in_local, out, *tp, lora_call);
}

void VocabParallelEmbedding::lookup(const int* ids, int rows, float* out) const {
  if (sharded_lookup)
    sharded_lookup(ids, rows, out);
  else
    kernels::embedding_forward(ids, rows, word.value, vocab_start, vocab_local, hidden, out);
}

void VocabParallelEmbedding::forward(const int* ids, int batch, int seq, float* out, float* full,
                                     const int* positions) const {
  const long rows = (long)batch * seq;
  if (!sequence_parallel) {
    lookup(ids, (int)rows, out);
    reduce_from_region_forward(*tp, out, rows * hidden);
    if (position.value)
      kernels::add_position_embedding(out, position.value, batch, seq, hidden, positions);
    return;
  }
  const long local_rows = rows / tp->size(), first = local_rows * tp->rank();
  lookup(ids, (int)rows, full);
  const float* summed = reduce_scatter_to_sequence_parallel_region(*tp, full, local_rows * hidden);
  std::copy_n(summed, local_rows * hidden, out);
  if (position.value)
    kernels::add_position_embedding_rows(out, position.value, first, local_rows, seq, hidden,
                                         positions);
}

void VocabParallelEmbedding::backward(const int* ids, int batch, int seq, const float* dout,
                                      float* full, const int* positions) const {
  if (!word.grad && !sharded_lookup_backward) return;  // frozen (LoRA): nothing to learn here
  const long rows = (long)batch * seq;
  if (sequence_parallel) {
    reduce_scatter_to_sequence_parallel_region_backward(*tp, dout, full,
                                                        rows / tp->size() * hidden);
    dout = full;
  }
  if (sharded_lookup_backward)
    sharded_lookup_backward(ids, (int)rows, dout);
  else
    kernels::embedding_backward(ids, (int)rows, dout, vocab_start, vocab_local, hidden, word.grad);
  if (position.value)
    kernels::position_embedding_backward(dout, position.grad, batch, seq, hidden, positions);
}

}  // namespace trident::tensor_parallel
