#pragma once
// The sample sources of a run (mock data, or Megatron datasets from --data-path), and the
// samples of a global batch that one data-parallel replica takes.
#include <iosfwd>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "data/sample_source.h"
#include "train/training_config.h"

namespace trident::train {

struct TrainingData {
  std::shared_ptr<data::SampleSource> train, valid, test;
};

TrainingData make_training_data(const TrainingConfig& config, std::ostream& log);

// This data-parallel replica's `microbatches` micro-batches of the global batch starting at
// sample `consumed`, into `tokens` ([m, b, seq + 1]): micro-batch i holds samples
// consumed + i * b * d + replica * b + [0, b) (Megatron's sampler), so the replicas together
// take the global batch in order whatever d is.
void fill_replica_batch(const data::SampleSource& source, long consumed, const TrainingConfig& c,
                        int microbatches, int replica, int replicas, std::vector<int>& tokens);

// The targets the loss counts in a batch of samples of seq + 1 tokens (positions 1..seq of
// each; --sft drops those its loss mask flags), summed over the data-parallel replicas: the
// loss is the mean over them.
long counted_targets(const std::vector<int>& tokens, int seq, comm::Communicator& data);

}  // namespace trident::train
