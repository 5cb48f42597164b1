#pragma once
// Keys and values of every position generated so far, per layer of this rank's stage:
// [slot, key/value head, position, head_dim] for K and for V (a head per local query head,
// or grouped-query attention's groups those heads read, so G / t per token, not h / t), so one
// head's keys over positions are contiguous (the decode step streams them). fp32, or bf16 in bf16
// runs (attention accumulates in fp32 either way). Sized once, for max_batch slots x max_sequence
// positions.
#include <cstdint>

#include "core/first_touch.h"
#include "kernels/cached_attention.h"

namespace trident::generation {

struct KvShape {
  int layers = 0, slots = 0, positions = 0, heads = 0, head_dim = 0;
  long values_per_layer() const { return 2L * slots * positions * heads * head_dim; }
};

class KvCache {
 public:
  KvCache() = default;
  KvCache(const KvShape& shape, bool bf16);
  const KvShape& shape() const { return shape_; }
  bool bf16() const { return bf16_; }
  long bytes() const;
  // Offset (in elements) of K (kv = 0) or V (kv = 1) of (layer, slot, head) at position 0.
  long offset(int layer, int kv, int slot, int head) const {
    const KvShape& s = shape_;
    return (((((long)layer * 2 + kv) * s.slots + slot) * s.heads + head) * s.positions) *
           s.head_dim;
  }
  // Layer l (of this stage) as the attention kernels read it.
  kernels::KvLayerView layer(int l);

 private:
  KvShape shape_;
  bool bf16_ = false;
  FirstTouchVector<float> f32_;
  FirstTouchVector<std::uint16_t> b16_;
};

}  // namespace trident::generation
