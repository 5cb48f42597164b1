#include "tensor_parallel/lm_head_loss.h"

#include <algorithm>

#include "kernels/gemm.h"
#include "kernels/low_precision.h"
#include "tensor_parallel/mappings.h"

namespace trident::tensor_parallel {

void LMHeadLoss::forward(kernels::GemmOperand x, const int* targets, int rows, float* losses,
                         float grad_scale, float* dx, float* dx_local) const {
  const int in = output_layer.in;
  if (blocks.rows > 0) {
    for (int first = 0; first < rows; first += chunk_rows) {
      const int count = std::min(chunk_rows, rows - first);
      chunk_in_blocks(x.offset((long)first * in), targets + first, count, losses + first,
                      grad_scale, dx + (long)first * in);
    }
    if (grad_scale != 0.f) reduce_dx(rows, dx, dx_local);
    return;
  }
  // In bf16 runs the fp32 logits chunk is free once the cross-entropy has written the bf16
  // d(logits): when it can hold the [vocab / t, hidden] weight gradient, the faster
  // inner-product kernel writes the chunk's dW there and it is added (see mixed_linear).
  ColumnParallelLinear layer = output_layer;
  kernels::LinearPrecision head_precision{};
  if (dlogits16 && output_layer.precision) {
    head_precision = *output_layer.precision;
    head_precision.scratch.weight_grad32 = logits;
    head_precision.scratch.weight_grad32_floats = (long)chunk_rows * output_layer.out_local;
    layer.precision = &head_precision;
  }
  for (int first = 0; first < rows; first += chunk_rows) {
    const int count = std::min(chunk_rows, rows - first);
    const kernels::GemmOperand x_chunk = x.offset((long)first * in);
    output_layer.forward(x_chunk, logits, count);
    cross_entropy.forward(logits, targets + first, count, losses + first, grad_scale, dlogits16);
    if (grad_scale == 0.f) continue;
    const kernels::GemmOperand dlogits = dlogits16 ? kernels::GemmOperand(dlogits16) : logits;
    layer.backward_partial(dlogits, x_chunk, dx + (long)first * in, count);
  }
  if (grad_scale != 0.f) reduce_dx(rows, dx, dx_local);
}

namespace {

// C = op(A) op(B) + beta C in the run's precision: bf16 operands (oneDNN's bf16 kernels,
// fp32 accumulation) or fp32.
void head_product(kernels::Trans ta, kernels::Trans tb, int m, int n, int k, kernels::GemmOperand a,
                  int lda, kernels::GemmOperand b, int ldb, float beta, float* c, int ldc) {
  if (a.bf16)
    kernels::gemm_bf16(ta, tb, m, n, k, a.bf16, lda, b.bf16, ldb, beta, c, ldc);
  else
    kernels::gemm(ta, tb, m, n, k, 1.f, a.fp32, lda, b.fp32, ldb, beta, c, ldc);
}

}  // namespace

void LMHeadLoss::chunk_in_blocks(kernels::GemmOperand x, const int* targets, int count,
                                 float* losses, float grad_scale, float* dx) const {
  using kernels::Trans;
  const int in = output_layer.in, vocab = output_layer.out_local;
  const bool bf16 = x.bf16 != nullptr;  // x, the weight's copy and d(logits) in bf16
  auto weight_rows = [&](int v) {
    return bf16 ? kernels::GemmOperand(output_layer.weight.low + (long)v * in)
                : kernels::GemmOperand(output_layer.weight.value + (long)v * in);
  };
  const kernels::GemmOperand dlogits = bf16 ? kernels::GemmOperand(dlogits16) : logits;
  float* dw = output_layer.weight.grad;
  const int last = (vocab - 1) / blocks.rows * blocks.rows;
  for (int v = 0; v < vocab; v += blocks.rows) {  // logits[:, v : v + n] = x W[v : v + n]^T
    const int n = std::min(blocks.rows, vocab - v);
    blocks.need(v, n);
    head_product(Trans::kNo, Trans::kYes, count, n, in, x, in, weight_rows(v), in, 0.f, logits + v,
                 vocab);
    blocks.progress();
  }
  cross_entropy.forward(logits, targets, count, losses, grad_scale, bf16 ? dlogits16 : nullptr);
  if (grad_scale == 0.f) return;
  // The step's first chunk writes the gradient's blocks (each once) instead of adding.
  DeferredZero* deferred = output_layer.precision ? output_layer.precision->deferred_zero : nullptr;
  const float dw_beta = deferred && deferred->claim(dw, (long)vocab * in) ? 0.f : 1.f;
  for (int v = last; v >= 0; v -= blocks.rows) {
    const int n = std::min(blocks.rows, vocab - v);
    blocks.need(v, n);
    head_product(Trans::kNo, Trans::kNo, count, in, n, dlogits.offset(v), vocab, weight_rows(v), in,
                 v == last ? 0.f : 1.f, dx, in);
    blocks.grad_begin(v, n);
    head_product(Trans::kYes, Trans::kNo, n, in, count, dlogits.offset(v), vocab, x, in, dw_beta,
                 dw + (long)v * in, in);
    blocks.grad_done(v, n);
    blocks.progress();
  }
}

void LMHeadLoss::reduce_dx(int rows, float* dx, float* dx_local) const {
  const int in = output_layer.in;
  comm::Communicator& tp = *output_layer.tp;
  if (sequence_parallel) {
    const long local = (long)rows / tp.size() * in;
    std::copy_n(gather_from_sequence_parallel_region_backward(tp, dx, local), local, dx_local);
  } else {
    copy_to_region_backward(tp, dx, (long)rows * in);
  }
}

const float* LMHeadLoss::logits_rows(kernels::GemmOperand x, int first, int count) const {
  output_layer.forward(x.offset((long)first * output_layer.in), logits,
                       std::min(count, chunk_rows));
  return logits;
}

int lm_head_chunk_rows(long tokens, int vocab_local, int hidden) {
  const long vocab = std::max(vocab_local, 1);
  const long target = std::max(512L, (32L << 20) / vocab);
  long chunks = (tokens + target - 1) / target;
  // Chunks of at least `hidden` rows hold the [vocab / t, hidden] fp32 weight gradient, when
  // such a chunk is at most 2^26 floats (256 MiB): fewer, longer chunks of that height.
  const long floor_rows = (long)hidden * vocab <= (64L << 20) ? hidden : 0;
  if ((tokens + chunks - 1) / chunks < floor_rows) chunks = std::max(1L, tokens / floor_rows);
  const long rows = ((tokens + chunks - 1) / chunks + 63) / 64 * 64;  // balanced, 64-row multiple
  return (int)std::min(tokens, rows);
}

}  // namespace trident::tensor_parallel
