#pragma once
// ZeRO-3's input word embedding, row by row (buckets.h VocabularyBlocks): no rank gathers the
// [vocab, hidden] table or reduces its gradient. A micro-batch reads only its tokens' rows,
// so the data-parallel ranks swap token ids instead: each fills, for every rank's tokens, the
// elements of their rows that lie in its own shard (zero elsewhere), and a reduce-scatter
// hands each rank its rows — exactly, since each element has one owner and the rest add
// zeros. Backward is the mirror: the ranks all-gather their tokens' d(rows), and each adds
// the elements in its shard to its shard's gradient. Traffic is d x (tokens x hidden) per
// pass, not the table.
#include <vector>

#include "comm/communicator.h"
#include "parameters/parameters.h"

namespace trident::data_parallel {

struct EmbeddingShard {
  long offset = 0;      // the table's first float in the buffer
  int vocab_start = 0;  // the token id of its first row (a tensor-parallel rank's range)
  int vocab_rows = 0;
  int hidden = 0;
  long shard_begin = 0, shard_end = 0;  // this rank's shard of the buffer
};

class ShardedEmbedding {
 public:
  ShardedEmbedding(Parameters& params, comm::Communicator& data, EmbeddingShard shard);
  // out[i] = row ids[i] of the table, or zeros where the id is outside its vocabulary range
  // (tensor parallelism sums the ranks' partial rows afterwards).
  void forward(const int* ids, int rows, float* out);
  // Adds every data-parallel rank's dout rows to this rank's shard of the table's gradient.
  void backward(const int* ids, int rows, const float* dout);

 private:
  void gather_ids(const int* ids, int rows);
  // Calls f(token row i of all ranks', element range [lo, hi) of the row, flat offset of lo)
  // for the part of each gathered token's row in this rank's shard.
  template <class F>
  void for_each_owned(int rows, F f) const;

  Parameters& params_;
  comm::Communicator& data_;
  EmbeddingShard shard_;
  std::vector<float> ids_, mine_, rows_;  // all ranks' ids (exact as floats); one rank's; rows
};

}  // namespace trident::data_parallel
