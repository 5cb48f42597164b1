#pragma once
// Causal multi-head attention in the flash-attention style: the s x s score matrix is
// never formed; queries are processed in blocks of kBlockQ rows against key blocks of
// kBlockK columns with an online softmax, and the backward pass recomputes each score
// tile from the saved log-sum-exp.
#include <cstdint>

#include "kernels/low_precision.h"

namespace trident::kernels {

struct AttentionShape {
  int batch;
  int seq;
  int heads;  // heads held by this rank
  int head_dim;
};

// Attention dropout on the probabilities, masks drawn per (sample, global head, query, key).
struct AttentionDropout {
  float probability = 0.f;
  std::uint64_t seed = 0;
  std::uint32_t site = 0;
  long first_sample = -1;  // sample of batch row 0; < 0: no dropout
  int head_offset = 0;     // global index of this rank's first head
  bool active() const { return probability > 0.f && first_sample >= 0; }
};

constexpr int kBlockQ = 64;
constexpr int kBlockK = 64;

// qkv: [batch, seq, 3, heads, head_dim] (q, k, v of one token side by side)
// out: [batch, seq, heads, head_dim]; lse: [batch, heads, seq] (saved for backward).
// precision kBf16: the tile products (Q K^T, P V and the backward's five) take bf16 operands
// with fp32 accumulation; the softmax, its statistics and every output stay fp32.
void flash_attention_forward(const float* qkv, float* out, float* lse, const AttentionShape& s,
                             const AttentionDropout& dropout = {},
                             Precision precision = Precision::kFp32);

// dqkv is overwritten, laid out as qkv.
void flash_attention_backward(const float* qkv, const float* out, const float* dout,
                              const float* lse, float* dqkv, const AttentionShape& s,
                              const AttentionDropout& dropout = {},
                              Precision precision = Precision::kFp32);

}  // namespace trident::kernels
