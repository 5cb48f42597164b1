#pragma once
// The sample sources of a run: mock data, or Megatron datasets from --data-path.
#include <iosfwd>
#include <memory>

#include "train/training_config.h"
#include "data/sample_source.h"

namespace trident {

struct TrainingData {
  std::shared_ptr<data::SampleSource> train, valid, test;
};

TrainingData make_training_data(const TrainingConfig& config, std::ostream& log);

}  // namespace trident
