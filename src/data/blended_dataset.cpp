#include "data/blended_dataset.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace trident::data {

void build_blending_indices(const std::vector<double>& weights, long size,
                            std::vector<std::int16_t>* dataset_index,
                            std::vector<std::int64_t>* dataset_sample_index) {
  double total = 0;
  for (double w : weights) total += w;
  std::vector<double> w(weights.size());
  for (size_t d = 0; d < w.size(); ++d) w[d] = weights[d] / total;
  std::vector<std::int64_t> taken(w.size(), 0);
  dataset_index->resize(size);
  dataset_sample_index->resize(size);
  for (long i = 0; i < size; ++i) {
    double at = std::max((double)i, 1.0);
    size_t best = 0;
    double best_error = w[0] * at - (double)taken[0];
    for (size_t d = 1; d < w.size(); ++d) {
      double error = w[d] * at - (double)taken[d];
      if (error > best_error) best_error = error, best = d;
    }
    (*dataset_index)[i] = (std::int16_t)best;
    (*dataset_sample_index)[i] = taken[best]++;
  }
}

BlendedDataset::BlendedDataset(std::vector<std::shared_ptr<SampleSource>> datasets,
                               std::vector<double> weights, long size)
    : datasets_(std::move(datasets)) {
  build_blending_indices(weights, size, &dataset_index_, &dataset_sample_index_);
  std::vector<long> needed(datasets_.size(), 0);
  for (long i = 0; i < size; ++i)
    needed[dataset_index_[i]] =
        std::max<long>(needed[dataset_index_[i]], dataset_sample_index_[i] + 1);
  for (size_t d = 0; d < datasets_.size(); ++d)
    if (datasets_[d]->size() >= 0 && datasets_[d]->size() < needed[d])
      throw std::logic_error("blended dataset " + std::to_string(d) + " has " +
                             std::to_string(datasets_[d]->size()) + " samples, " +
                             std::to_string(needed[d]) + " are needed");
}

void BlendedDataset::sample(long index, int* out) const {
  if (index < 0 || index >= size())
    throw std::out_of_range("blended sample " + std::to_string(index) + " of " +
                            std::to_string(size()));
  datasets_[dataset_index_[index]]->sample(dataset_sample_index_[index], out);
}

}  // namespace trident::data
