#include "data_parallel/sharded_embedding.h"

#include <algorithm>
#include <utility>

namespace trident::data_parallel {

ShardedEmbedding::ShardedEmbedding(Parameters& params, comm::Communicator& data,
                                   EmbeddingShard shard)
    : params_(params), data_(data), shard_(shard) {}

// Token ids are below 2^24, so they travel as floats exactly.
void ShardedEmbedding::gather_ids(const int* ids, int rows) {
  mine_.assign(ids, ids + rows);
  ids_.resize((size_t)rows * data_.size());
  data_.all_gather(mine_.data(), ids_.data(), rows);
}

template <class F>
void ShardedEmbedding::for_each_owned(int rows, F f) const {
  const long h = shard_.hidden;
  for (long i = 0; i < (long)rows * data_.size(); ++i) {
    const long v = (long)ids_[i] - shard_.vocab_start;
    if (v < 0 || v >= shard_.vocab_rows) continue;
    const long row = shard_.offset + v * h;
    const long lo = std::max(row, shard_.shard_begin), hi = std::min(row + h, shard_.shard_end);
    if (lo < hi) f(i, lo - row, hi - row, lo);
  }
}

void ShardedEmbedding::forward(const int* ids, int rows, float* out) {
  gather_ids(ids, rows);
  const long h = shard_.hidden;
  rows_.assign(ids_.size() * h, 0.f);
  const float* values = std::as_const(params_).values();
  for_each_owned(rows, [&](long i, long lo, long hi, long at) {
    std::copy_n(values + at, hi - lo, rows_.data() + i * h + lo);
  });
  data_.reduce_scatter(rows_.data(), out, (long)rows * h);
}

void ShardedEmbedding::backward(const int* ids, int rows, const float* dout) {
  gather_ids(ids, rows);
  const long h = shard_.hidden;
  rows_.resize(ids_.size() * h);
  data_.all_gather(dout, rows_.data(), (long)rows * h);
  float* grads = params_.grads();
  for_each_owned(rows, [&](long i, long lo, long hi, long at) {
    const float* d = rows_.data() + i * h + lo;
    for (long k = 0; k < hi - lo; ++k) grads[at + k] += d[k];
  });
}

}  // namespace trident::data_parallel
