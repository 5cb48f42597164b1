#pragma once
// Megatron's BlendedDataset: sample i comes from dataset dataset_index[i], which is
// chosen greedily as the one furthest below its weight so far, so the realised fraction
// of every dataset stays within one sample of its weight at every prefix.
#include <cstdint>
#include <memory>
#include <vector>

#include "data/sample_source.h"

namespace trident::data {

// Megatron's build_blending_indices; weights need not be normalised.
void build_blending_indices(const std::vector<double>& weights, long size,
                            std::vector<std::int16_t>* dataset_index,
                            std::vector<std::int64_t>* dataset_sample_index);

class BlendedDataset : public SampleSource {
 public:
  BlendedDataset(std::vector<std::shared_ptr<SampleSource>> datasets, std::vector<double> weights,
                 long size);
  long size() const override { return (long)dataset_index_.size(); }
  void sample(long index, int* out) const override;
  const std::vector<std::int16_t>& dataset_index() const { return dataset_index_; }

 private:
  std::vector<std::shared_ptr<SampleSource>> datasets_;
  std::vector<std::int16_t> dataset_index_;
  std::vector<std::int64_t> dataset_sample_index_;
};

}  // namespace trident::data
