#pragma once
// The tied output layer fused with the vocabulary-parallel cross-entropy, one chunk of rows
// at a time: a chunk's logits become its losses and, when training, d(logits), which at once
// give the chunk's d(input) and its share of the word-embedding gradient. The full
// [tokens, vocab / t] logits and their gradient never exist, only one chunk's (llm.c's fused
// classifier, made vocabulary-parallel). d(input) is summed over the tensor group once,
// after the last chunk (f's backward). A chunk as tall as the micro-batch is the un-fused
// reference: logits, then cross-entropy, then the output layer's backward.
#include "tensor_parallel/cross_entropy.h"
#include "tensor_parallel/layers.h"

namespace trident::tensor_parallel {

struct LMHeadLoss {
  ColumnParallelLinear output_layer;  // weight = this rank's word-embedding shard, no bias
  VocabParallelCrossEntropy cross_entropy;
  int chunk_rows = 0;
  float* logits = nullptr;               // planned scratch, [chunk_rows, vocab_local]
  kernels::bf16_t* dlogits16 = nullptr;  // bf16 runs: the chunk's d(logits), same shape

  // Sequence parallelism: x is the all-gathered final LayerNorm output and d(input) is
  // reduce-scattered into dx_local (this rank's rows) instead of all-reduced; dx is then
  // scratch for the partial sums.
  bool sequence_parallel = false;

  // losses[r] = -log softmax(x[r] W^T)[targets[r]]. With grad_scale != 0, also
  // dx = grad_scale * d(sum of losses)/dx and the weight gradient accumulated.
  void forward(kernels::GemmOperand x, const int* targets, int rows, float* losses,
               float grad_scale, float* dx, float* dx_local = nullptr) const;
  // This rank's logits for rows [first, first + count), count <= chunk_rows, in the scratch.
  const float* logits_rows(kernels::GemmOperand x, int first, int count) const;
};

// Rows per chunk: at most about 128 MiB of fp32 logits (never fewer than 256 rows), the
// micro-batch split into equal chunks of a multiple of 64 rows. Every chunk re-streams the
// [vocab, hidden] weight and its fp32 gradient, and short or ragged chunks run the three
// products slowly (on gpt2-small's 50304 x 768 head, bf16: 64-row chunks ran at 240-560
// GFLOP/s, 512-row ones at 570-720, the whole 1024 rows at 590-750).
int lm_head_chunk_rows(long tokens, int vocab_local);

}  // namespace trident::tensor_parallel
