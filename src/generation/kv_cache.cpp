#include "generation/kv_cache.h"

namespace trident::generation {

KvCache::KvCache(const KvShape& shape, bool bf16) : shape_(shape), bf16_(bf16) {
  const long n = shape.layers * shape.values_per_layer();
  if (bf16)
    assign_parallel<std::uint16_t>(b16_, n, 0);
  else
    assign_parallel(f32_, n, 0.f);
}

long KvCache::bytes() const {
  return shape_.layers * shape_.values_per_layer() * (bf16_ ? 2L : 4L);
}

kernels::KvLayerView KvCache::layer(int l) {
  kernels::KvLayerView v;
  v.heads = shape_.heads, v.head_dim = shape_.head_dim, v.positions = shape_.positions;
  if (bf16_)
    v.k16 = b16_.data() + offset(l, 0, 0, 0), v.v16 = b16_.data() + offset(l, 1, 0, 0);
  else
    v.k = f32_.data() + offset(l, 0, 0, 0), v.v = f32_.data() + offset(l, 1, 0, 0);
  return v;
}

}  // namespace trident::generation
