#pragma once
// Attention of new tokens against a KV cache (generation). Each step's rows belong to
// segments: a slot's new tokens at consecutive positions. A row at position P attends to
// the slot's cached positions 0..P (the last `window` of them with a sliding window), its own
// key included; the keys and values of the step's
// rows are appended to the cache first.
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/low_precision.h"

namespace trident::kernels {

// One layer's cache on this rank: K and V each [slot, head, position, head_dim], fp32 (k, v)
// or bf16 (k16, v16). Its heads are the key / value heads this rank's query heads read
// (grouped-query attention: their groups, not one per query head).
struct KvLayerView {
  float *k = nullptr, *v = nullptr;
  bf16_t *k16 = nullptr, *v16 = nullptr;
  int heads = 0, head_dim = 0, positions = 0;
  long head_stride() const { return (long)positions * head_dim; }
  long slot_stride() const { return (long)heads * head_stride(); }
};

// `count` new tokens of `slot` at positions [start, start + count), rows [row, row + count).
struct CachedSegment {
  int slot = 0, start = 0, count = 0, row = 0;
};

// Copies the k and v parts of qkv ([rows, 3, heads, head_dim]) into the cache.
void kv_cache_append(const float* qkv, const KvLayerView& kv, const CachedSegment* segments,
                     int n_segments);
// The same from any layout: cache head j holds key / value head layout.first_kv + j.
void kv_cache_append(const float* qkv, const QkvLayout& layout, const KvLayerView& kv,
                     const CachedSegment* segments, int n_segments);

// out: [rows, heads, head_dim] = softmax(q k^T / sqrt(head_dim)) v over each row's visible
// positions, in fp32 (bf16 cache entries are widened).
void cached_attention(const float* qkv, float* out, const KvLayerView& kv,
                      const CachedSegment* segments, int n_segments);
// The same for `heads` query heads in `layout`, head h reading cache head
// h / layout.heads_per_kv. window > 0: a row at position P reads positions
// (P - window, P] only (sliding-window attention; the cache still holds every position).
void cached_attention(const float* qkv, const QkvLayout& layout, int heads, float* out,
                      const KvLayerView& kv, const CachedSegment* segments, int n_segments,
                      int window = 0);

}  // namespace trident::kernels
