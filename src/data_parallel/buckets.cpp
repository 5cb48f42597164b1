#include "data_parallel/buckets.h"

#include <algorithm>

namespace trident::data_parallel {

std::vector<Bucket> gradient_buckets(const std::vector<std::pair<long, long>>& tensors,
                                     long buffer_floats, long bucket_floats) {
  std::vector<Bucket> buckets;
  const int n = (int)tensors.size();
  long filled = 0;
  int end = n;
  for (int k = n - 1; k >= 0; --k) {  // reverse order of use
    filled += tensors[k].second;
    if (filled >= bucket_floats || k == 0) {
      const long lo = k == 0 ? 0 : tensors[k].first;
      const long hi = end == n ? buffer_floats : tensors[end].first;  // the first takes the padding
      buckets.push_back({k, end, lo, hi - lo});
      end = k;
      filled = 0;
    }
  }
  return buckets;
}

long largest_bucket_window(const std::vector<Bucket>& buckets, int in_flight) {
  long largest = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    long held = 0;
    for (size_t j = i >= (size_t)in_flight ? i - in_flight : 0; j <= i; ++j)
      held += buckets[j].floats;
    largest = std::max(largest, held);
  }
  return largest;
}

long largest_sharded_gradient_floats(const std::vector<Bucket>& buckets, long buffer_floats,
                                     int data_ranks, int in_flight) {
  const long shard = buffer_floats / data_ranks;
  const long page_floats = 512L * 1024;  // 2 MiB
  long largest = 0;
  for (int r = 0; r < data_ranks; ++r)
    for (size_t i = 0; i < buckets.size(); ++i) {
      // Buckets i - in_flight .. i lie side by side: [lo, hi).
      const size_t first = i >= (size_t)in_flight ? i - in_flight : 0;
      const long lo = buckets[i].offset, hi = buckets[first].offset + buckets[first].floats;
      const long overlap = std::max(0L, std::min(hi, (r + 1) * shard) - std::max(lo, r * shard));
      largest = std::max(largest, shard + (hi - lo) - overlap);
    }
  return std::min(buffer_floats, largest + page_floats * (long)(buckets.size() + 1));
}

}  // namespace trident::data_parallel
