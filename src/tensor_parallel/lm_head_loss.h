#pragma once
// The tied output layer fused with the vocabulary-parallel cross-entropy, one chunk of rows
// at a time: a chunk's logits become its losses and, when training, d(logits), which at once
// give the chunk's d(input) and its share of the word-embedding gradient. The full
// [tokens, vocab / t] logits and their gradient never exist, only one chunk's (llm.c's fused
// classifier, made vocabulary-parallel). d(input) is summed over the tensor group once,
// after the last chunk (f's backward). A chunk as tall as the micro-batch is the un-fused
// reference: logits, then cross-entropy, then the output layer's backward.
#include <functional>

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

  // Sharded weights (ZeRO-3, fp32 or bf16; data_parallel/buckets.h VocabularyBlocks): the weight's
  // rows are here only a block at a time. Each chunk of rows forms its logits block by block
  // (columns of the logits), takes the cross-entropy over all of them, then forms d(input)
  // and the weight gradient block by block in reverse (the last block is still here); after
  // the last chunk a block's gradient is complete. The hooks take a block's first row and
  // its row count.
  struct RowBlocks {
    int rows = 0;                                          // 0: the whole weight is here
    std::function<void(int first, int count)> need;        // before a product reads them
    std::function<void(int first, int count)> grad_begin;  // before their gradient is written
    std::function<void(int first, int count)> grad_done;   // after: reduce it
    std::function<void()> progress;                        // between products
  } blocks;

  // losses[r] = -log softmax(x[r] W^T)[targets[r]]. With grad_scale != 0, also
  // dx = grad_scale * d(sum of losses)/dx and the weight gradient accumulated.
  void forward(kernels::GemmOperand x, const int* targets, int rows, float* losses,
               float grad_scale, float* dx, float* dx_local = nullptr) const;
  // This rank's logits for rows [first, first + count), count <= chunk_rows, in the scratch.
  const float* logits_rows(kernels::GemmOperand x, int first, int count) const;

 private:
  // One chunk of rows with the weight in blocks: its losses and (grad_scale != 0) its dx
  // (partial over the tensor group) and its share of the weight gradient.
  void chunk_in_blocks(kernels::GemmOperand x, const int* targets, int count, float* losses,
                       float grad_scale, float* dx) const;
  // After the last chunk: d(input) summed over the tensor group.
  void reduce_dx(int rows, float* dx, float* dx_local) const;
};

// Rows per chunk: at most about 128 MiB of fp32 logits (never fewer than 512 rows), the
// micro-batch split into equal chunks of a multiple of 64 rows. Every chunk re-streams the
// [vocab, hidden] weight and its fp32 gradient, and short or ragged chunks run the three
// products slowly (on gpt2-small's 50304 x 768 head, bf16: 64-row chunks ran at 240-560
// GFLOP/s, 512-row ones at 570-720, the whole 1024 rows at 590-750). The floor is 512 rows
// because a large vocabulary would otherwise get short chunks: Llama-3.2-1B's 128256-row
// head in 256-row chunks ran its products at 316-368 GFLOP/s against 420-440 for the layers
// (Zen 4, bf16, 2 threads; the weight gradient re-reads and re-writes 1 GB of fp32 per
// chunk), and 8 layers of that model trained at MFU 0.75 against 0.81 with 512-row chunks
// (256 MiB of logits). Where a chunk of `hidden` rows is at most 256 MiB, chunks are at least
// that tall: the fp32 logits buffer then holds the output layer's weight gradient, and bf16
// runs compute it with the inner-product kernel instead of accumulating through matmul
// (gpt2-small, B4 T256: one 1024-row chunk instead of two of 512; its three products ran at
// 348, 400 and 371 GFLOP/s in the step with 512 rows, the inner product 400-430 alone).
int lm_head_chunk_rows(long tokens, int vocab_local, int hidden);

}  // namespace trident::tensor_parallel
