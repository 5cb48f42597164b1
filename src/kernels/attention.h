#pragma once
// Causal multi-head attention (optionally within a sliding window) in the flash-attention style:
// the s x s score matrix is never formed; queries are processed in blocks of kBlockQ rows against
// key blocks of kBlockK columns with an online softmax, and the backward pass recomputes each score
// tile from the saved log-sum-exp.
#include <cstdint>
#include <vector>

#include "kernels/low_precision.h"
#include "kernels/rope.h"

namespace trident::kernels {

struct AttentionShape {
  int batch;
  int seq;
  int heads;  // heads held by this rank
  int head_dim;
  // Sliding window (Mistral): query i attends to keys j with i - window < j <= i; 0: every
  // j <= i. Key tiles wholly outside the window are skipped.
  int window = 0;
  // Packed documents (Megatron's --reset-attention-mask), [batch, seq] or null: query t of a
  // sample attends only to keys j >= doc_start[t], the first token of its document. Within a
  // sample doc_start never decreases, so key tiles before a query block's first document are
  // skipped, as are (backward) query tiles past a key block's last one.
  const int* doc_start = nullptr;
  // RoPE positions [batch, seq] or null (token t at position t); --reset-position-ids
  // restarts them at every document.
  const int* positions = nullptr;
};

// Score tiles (kBlockQ x kBlockK) one head's forward computes under s's mask: a causal pass
// takes every tile on or below the diagonal, a window or documents fewer.
long attention_tiles(const AttentionShape& s);

// Attention dropout on the probabilities, masks drawn per (sample, global head, query, key).
struct AttentionDropout {
  float probability = 0.f;
  std::uint64_t seed = 0;
  std::uint32_t site = 0;
  long first_sample = -1;  // sample of batch row 0; < 0: no dropout
  int head_offset = 0;     // global index of this rank's first head
  bool active() const { return probability > 0.f && first_sample >= 0; }
};

// Where each head's q, k and v sit in the projections' output (and their gradients in the
// backward's output, laid out alike). Token r (= b * seq + t) of query head h at
// qkv + r * q_stride + h * head_dim; of key head j at qkv + k_offset + r * kv_stride +
// j * head_dim, its value at v_offset instead. Query head h reads key / value head
// first_kv + h / heads_per_kv: grouped-query attention reads the group's k and v where the
// projection wrote them, never expanded to every head.
struct QkvLayout {
  long q_stride = 0;
  long kv_stride = 0;
  long k_offset = 0, v_offset = 0;
  int kv_heads = 0;  // key / value heads in the tensor (some may be read by no head held)
  int heads_per_kv = 1;
  int first_kv = 0;
  int kv_of(int head) const { return first_kv + head / heads_per_kv; }
  // Multi-head attention's [tokens, 3, heads, head_dim].
  static QkvLayout packed(int heads, int head_dim);
};

// Key / value heads the query heads [0, heads) read: first_kv on, one per heads_per_kv.
int kv_heads_read(const QkvLayout& l, int heads);
// Zeroes the d k and d v of the layout's key / value heads no query head of [0, heads) reads
// (replicated groups of other tensor-parallel ranks' heads) in rows tokens.
void zero_unread_kv_grads(float* dqkv, const QkvLayout& l, int heads, long rows, int hd);

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

// The same on any QkvLayout, with RoPE (rope non-null) applied to q and k as each head's
// tiles are loaded (token t of a sample at position t): qkv holds them unrotated, and
// backward rotates d q and d k back as it stores them. dqkv (laid out as qkv) is
// overwritten, key / value heads no query head reads with 0.
void flash_attention_forward(const float* qkv, const QkvLayout& layout, float* out, float* lse,
                             const AttentionShape& s, const AttentionDropout& dropout,
                             Precision precision, const RopeTable* rope);
void flash_attention_backward(const float* qkv, const QkvLayout& layout, const float* out,
                              const float* dout, const float* lse, float* dqkv,
                              const AttentionShape& s, const AttentionDropout& dropout,
                              Precision precision, const RopeTable* rope);

// ---- Blocks for context parallelism (src/context_parallel/) ----
// A rank holds some rows of a sequence, not a prefix: its queries meet other ranks' keys and
// values block by block. The tile loops are the ones above, the mask taken from global
// positions (causal, window and documents), so a tile no query of a block sees is skipped
// (under context parallelism's load-balanced chunks, whole quarters of a block are), and
// dropout draws the bits of the global (sample, head, query, key) of the whole sequence.
// Operands are head-major: q, out, dout, dq [batch, heads, q_rows, hd]; lse and delta
// [batch, heads, q_rows]; k, v, dk, dv [batch, kv heads, kv_rows, hd], query head h reading
// key / value head h / heads_per_kv (kv heads: those [0, heads) read).

// Rows [row, row + count) of a block sit at the consecutive global positions [pos, pos + count).
struct PositionRun {
  int row, count, pos;
};

struct AttentionBlock {
  int batch, heads, heads_per_kv, head_dim;
  int q_rows, kv_rows;                       // rows of one (sample, head)
  std::vector<PositionRun> q_runs, kv_runs;  // each covering its rows, ascending positions
  int seq;                                   // the whole sequence's length (dropout's keys)
  int window = 0;                            // sliding window, in positions (0: none)
  const int* doc_start = nullptr;  // [batch, q_rows]: global position of the query's document
};

// Heads [0, heads) of batch x seq rows, token t of sample b's head h at
// src + (b * seq + t) * stride + h * hd, into dst [batch, heads, seq, hd], rotated (rope
// non-null) to positions [batch, seq] (or t when null). scatter_heads is the transpose,
// rotating back (RoPE's backward).
void gather_heads(const float* src, long stride, int batch, int seq, int heads, int hd, float* dst,
                  const RopeTable* rope, const int* positions);
void scatter_heads(const float* src, int batch, int seq, int heads, int hd, float* dst, long stride,
                   const RopeTable* rope, const int* positions);

// The block's partial attention: out and lse (overwritten) are the softmax over the block's
// visible keys only; a row that sees none gets out 0 and lse -inf.
void attention_block_forward(const float* q, const float* k, const float* v, float* out, float* lse,
                             const AttentionBlock& block, const AttentionDropout& dropout,
                             Precision precision);
// (out, lse) becomes the softmax over its keys and the partial's together (rows x hd).
void attention_merge(float* out, float* lse, const float* part_out, const float* part_lse,
                     long rows, int hd);
// delta[r] = rowsum(out * dout) of rows x hd, which backward takes with the final lse.
void attention_row_delta(const float* out, const float* dout, long rows, int hd, float* delta);
// The block's share of the gradients, from the final lse and delta of its rows (flash
// backward needs no more of the other blocks): dq, dk and dv accumulate.
void attention_block_backward(const float* q, const float* k, const float* v, const float* dout,
                              const float* lse, const float* delta, float* dq, float* dk, float* dv,
                              const AttentionBlock& block, const AttentionDropout& dropout,
                              Precision precision);

}  // namespace trident::kernels
