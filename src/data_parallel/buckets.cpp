#include "data_parallel/buckets.h"

#include <algorithm>

namespace trident::data_parallel {

std::vector<long> shard_counts(long lo, long hi, long buffer_floats, int ranks) {
  const long shard = buffer_floats / ranks;
  std::vector<long> counts(ranks);
  for (int r = 0; r < ranks; ++r)
    counts[r] = std::max(0L, std::min(hi, (r + 1) * shard) - std::max(lo, r * shard));
  return counts;
}

std::vector<std::pair<long, long>> vocabulary_blocks(
    const std::vector<std::pair<long, long>>& tensors, const VocabularyBlocks& vocab) {
  std::vector<std::pair<long, long>> blocks;
  if (vocab.head_tensor < 0) return blocks;
  const auto [offset, floats] = tensors[vocab.head_tensor];
  for (long at = 0; at < floats; at += vocab.block_floats)
    blocks.emplace_back(offset + at, std::min(vocab.block_floats, floats - at));
  return blocks;
}

std::vector<Bucket> gradient_buckets(const std::vector<std::pair<long, long>>& tensors,
                                     long buffer_floats, long bucket_floats,
                                     const VocabularyBlocks& vocab) {
  std::vector<Bucket> buckets;
  const int n = (int)tensors.size();
  // Where tensor k's bucket ends: the next tensor, or (the last) the buffer with its padding.
  auto end_of = [&](int k) { return k + 1 == n ? buffer_floats : tensors[k + 1].first; };
  long filled = 0;
  int end = n;
  auto close = [&](int k) {  // tensors [k, end) as one bucket
    const long lo = k == 0 ? 0 : tensors[k].first;
    buckets.push_back({k, end, lo, end_of(end - 1) - lo});
    end = k;
    filled = 0;
  };
  for (int k = n - 1; k >= 0; --k) {  // reverse order of use
    if (k == vocab.head_tensor || k == vocab.sparse_tensor) {
      if (end > k + 1) close(k + 1);
      std::vector<std::pair<long, long>> blocks = vocabulary_blocks(tensors, vocab);
      if (k != vocab.head_tensor) blocks = {tensors[k]};
      blocks.front().first = k == 0 ? 0 : blocks.front().first;
      blocks.back().second = end_of(k) - blocks.back().first;
      for (size_t b = blocks.size(); b-- > 0;)
        buckets.push_back({k, k + 1, blocks[b].first, blocks[b].second, true});
      end = k;
      continue;
    }
    filled += tensors[k].second;
    if (filled >= bucket_floats || k == 0) close(k);
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

namespace {

// Floats covered by the union of ranges [lo, hi) (empty ones allowed).
long union_floats(std::vector<std::pair<long, long>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  long covered = 0, reached = 0;
  for (auto [lo, hi] : ranges) {
    lo = std::max(lo, reached);
    if (hi > lo) covered += hi - lo, reached = hi;
  }
  return covered;
}

// Sorted, disjoint and non-empty: the union of `ranges`.
std::vector<std::pair<long, long>> merged(std::vector<std::pair<long, long>> ranges) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<long, long>> out;
  for (auto [lo, hi] : ranges) {
    if (hi <= lo) continue;
    if (!out.empty() && lo <= out.back().second)
      out.back().second = std::max(out.back().second, hi);
    else
      out.emplace_back(lo, hi);
  }
  return out;
}

// The least any rank's shard [r S, (r + 1) S) of `ranks` overlaps the merged ranges: 0 when
// some shard misses them all (checked without visiting every rank, as d runs to thousands in
// the planner's search).
long least_shard_overlap(const std::vector<std::pair<long, long>>& ranges, long shard, int ranks) {
  long touched = 0, last = -1;
  for (auto [lo, hi] : ranges) {
    const long first = std::max(lo / shard, last + 1),
               end = std::min<long>(ranks - 1, (hi - 1) / shard);
    if (end >= first) touched += end - first + 1, last = end;
  }
  if (touched < ranks) return 0;
  long least = shard;
  for (int r = 0; r < ranks; ++r) {
    long overlap = 0;
    for (auto [lo, hi] : ranges)
      overlap += std::max(0L, std::min(hi, (r + 1) * shard) - std::max(lo, r * shard));
    least = std::min(least, overlap);
  }
  return least;
}

// The most floats a rank holds of the ranges beside its own shard, for the rank that holds
// the most: the union of both, |ranges| + S - (their overlap), largest where the overlap is
// least.
long largest_with_shard(const std::vector<std::pair<long, long>>& ranges, long shard, int ranks) {
  const std::vector<std::pair<long, long>> held = merged(ranges);
  long covered = 0;
  for (auto [lo, hi] : held) covered += hi - lo;
  if (shard <= 0) return covered;
  return covered + shard - least_shard_overlap(held, shard, ranks);
}

}  // namespace

long largest_sharded_gradient_floats(const std::vector<Bucket>& buckets, long buffer_floats,
                                     int data_ranks, int in_flight, bool last_bucket_held) {
  const long shard = buffer_floats / data_ranks;
  const long page_floats = 512L * 1024;  // 2 MiB
  std::pair<long, long> held{0, 0};
  if (last_bucket_held && !buckets.empty())
    held = {buckets.back().offset, buckets.back().offset + buckets.back().floats};
  long largest = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    // Buckets i - in_flight .. i lie side by side: [lo, hi).
    const size_t first = i >= (size_t)in_flight ? i - in_flight : 0;
    const long lo = buckets[i].offset, hi = buckets[first].offset + buckets[first].floats;
    largest = std::max(largest, largest_with_shard({{lo, hi}, held}, shard, data_ranks));
  }
  // The pages bucket edges split: each stays from its first write until the reduction of
  // the second of the buckets that share it.
  long split_pages = 1;  // the shard's edge
  for (const Bucket& b : buckets) split_pages += b.offset % page_floats != 0;
  return std::min(buffer_floats, largest + page_floats * split_pages);
}

namespace {
// The ranges of units held together: `window` consecutive ones, and with `wrap` the first
// with each of them (a tied embedding stays through the forward for the output layer).
std::vector<std::vector<std::pair<long, long>>> unit_windows(
    const std::vector<std::pair<long, long>>& units, int window, bool wrap) {
  std::vector<std::vector<std::pair<long, long>>> windows;
  for (size_t i = 0; i < units.size(); ++i) {
    const size_t last = std::min(units.size(), i + (size_t)window) - 1;
    windows.push_back({{units[i].first, units[last].first + units[last].second}});
    if (wrap) windows.back().emplace_back(units[0].first, units[0].first + units[0].second);
  }
  return windows;
}
}  // namespace

long largest_unit_window(const std::vector<std::pair<long, long>>& units, int window, bool wrap) {
  long largest = 0;
  for (const auto& held : unit_windows(units, window, wrap))
    largest = std::max(largest, union_floats(held));
  return largest;
}

long largest_sharded_weight_floats(const std::vector<std::pair<long, long>>& units,
                                   long buffer_floats, int data_ranks, int window, bool wrap) {
  const long shard = buffer_floats / data_ranks;
  const long page_floats = 512L * 1024;  // 2 MiB
  const auto windows = unit_windows(units, window, wrap);
  long largest = 0;
  for (const std::vector<std::pair<long, long>>& held : windows)
    largest = std::max(largest, largest_with_shard(held, shard, data_ranks));
  return std::min(buffer_floats, largest + page_floats * 2 * (long)window);
}

std::vector<std::pair<long, long>> vocabulary_units(
    const std::vector<std::pair<long, long>>& units,
    const std::vector<std::pair<long, long>>& tensors, const VocabularyBlocks& vocab) {
  if (!vocab.active()) return units;
  std::vector<std::pair<long, long>> taken;  // the vocabulary tensors' ranges
  for (int k : {vocab.head_tensor, vocab.sparse_tensor})
    if (k >= 0) taken.emplace_back(tensors[k].first, tensors[k].first + tensors[k].second);
  std::vector<std::pair<long, long>> out;
  for (auto [offset, floats] : units) {
    long lo = offset;
    const long hi = offset + floats;
    for (auto [t_lo, t_hi] : merged(taken)) {
      if (t_hi <= lo || t_lo >= hi) continue;
      if (t_lo > lo) out.emplace_back(lo, t_lo - lo);
      if (vocab.head_tensor >= 0 && t_lo == tensors[vocab.head_tensor].first)
        for (auto block : vocabulary_blocks(tensors, vocab)) out.push_back(block);
      lo = std::max(lo, t_hi);
    }
    if (hi > lo) out.emplace_back(lo, hi - lo);
  }
  return out;
}

}  // namespace trident::data_parallel
