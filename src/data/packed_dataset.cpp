#include "data/packed_dataset.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <stdexcept>

#include "config/token_flags.h"
#include "data/numpy_random.h"

namespace trident::data {

std::vector<std::vector<DocumentPiece>> best_fit_bins(const std::vector<int>& sizes, long first,
                                                      long end, int capacity) {
  std::vector<DocumentPiece> pieces;
  for (long d = first; d < end; ++d)
    for (int offset = 0; offset < sizes[d]; offset += capacity)
      pieces.push_back({d, offset, std::min(capacity, sizes[d] - offset)});
  // Longest first; equal lengths in document order, so the packing is deterministic.
  std::stable_sort(
      pieces.begin(), pieces.end(),
      [](const DocumentPiece& a, const DocumentPiece& b) { return a.length > b.length; });
  std::vector<std::vector<DocumentPiece>> bins;
  std::multimap<int, size_t> room;  // free tokens -> bin; the smallest that fits is best
  for (const DocumentPiece& p : pieces) {
    auto fit = room.lower_bound(p.length);
    size_t bin;
    int left;
    if (fit == room.end()) {
      bin = bins.size(), left = capacity;
      bins.emplace_back();
    } else {
      bin = fit->second, left = fit->first;
      room.erase(fit);
    }
    bins[bin].push_back(p);
    if (left - p.length > 0) room.emplace(left - p.length, bin);
  }
  return bins;
}

PackedDataset::PackedDataset(std::shared_ptr<const IndexedDataset> data,
                             std::shared_ptr<const IndexedDataset> loss_mask,
                             const PackedDatasetSpec& spec)
    : data_(std::move(data)), loss_mask_(std::move(loss_mask)), spec_(spec) {
  std::vector<int> sizes(data_->sequences());
  for (long d = 0; d < data_->sequences(); ++d) sizes[d] = (int)data_->size(d);
  bins_ = best_fit_bins(sizes, spec.first_sequence, spec.end_sequence, spec.seq_length + 1);
  if (bins_.empty())
    throw std::invalid_argument("--pack-documents: the " + spec.split_name +
                                " split has no tokens");
  NumpyRandomState rng(spec.seed);
  while ((long)order_.size() < spec.num_samples) {
    std::vector<std::int64_t> epoch(bins_.size());
    std::iota(epoch.begin(), epoch.end(), 0);
    rng.shuffle(epoch);
    order_.insert(order_.end(), epoch.begin(), epoch.end());
  }
  order_.resize(spec.num_samples);
}

void PackedDataset::sample(long index, int* out) const {
  if (index < 0 || index >= size())
    throw std::out_of_range(spec_.split_name + " sample " + std::to_string(index) + " of " +
                            std::to_string(size()));
  thread_local std::vector<int> tokens, mask;
  tokens.clear(), mask.clear();
  for (const DocumentPiece& p : bins_[order_[index]]) {
    data_->read(p.document, p.offset, p.length, &tokens);
    if (loss_mask_) loss_mask_->read(p.document, p.offset, p.length, &mask);
  }
  const size_t n = (size_t)spec_.seq_length + 1;
  for (size_t k = 0; k < n; ++k) {
    if (k >= tokens.size())
      out[k] = spec_.pad_id | kUncountedTarget;
    else
      out[k] = loss_mask_ && mask[k] == 0 ? tokens[k] | kUncountedTarget : tokens[k];
  }
}

}  // namespace trident::data
