#include "train/training_data.h"

#include <algorithm>

#include "config/token_flags.h"
#include "data/dataset_builder.h"
#include "data/mock_dataset.h"

namespace trident::train {

TrainingData make_training_data(const TrainingConfig& c, std::ostream& log) {
  TrainingData d;
  if (c.mock_data) {
    // Validation and test draw from other seeds of the same generator: same pattern,
    // samples never seen in training.
    d.train =
        std::make_shared<data::MockGPTDataset>(c.model.vocab_size, c.model.seq_length, c.seed);
    d.valid =
        std::make_shared<data::MockGPTDataset>(c.model.vocab_size, c.model.seq_length, c.seed + 1);
    d.test =
        std::make_shared<data::MockGPTDataset>(c.model.vocab_size, c.model.seq_length, c.seed + 2);
    return d;
  }
  data::DataRequest r;
  r.data_path = c.data_path;
  r.split = c.split;
  r.seq_length = c.model.seq_length;
  r.seed = (std::uint32_t)c.seed;
  r.cache_path = c.data_cache_path;
  r.loss_masks = c.sft;
  r.pack_documents = c.pack_documents;
  r.pad_id = std::max(c.packed.eod, 0);
  r.samples[0] = c.total_train_samples();
  r.samples[1] = c.eval_iters > 0 ? c.valid_samples() : 0;
  r.samples[2] = c.eval_iters > 0 ? c.test_samples() : 0;
  data::DataSplits s = data::build_gpt_datasets(r, log);
  d.train = s.train, d.valid = s.valid, d.test = s.test;
  if (!d.train) throw std::invalid_argument("--split gives the train split no documents");
  return d;
}

void fill_replica_batch(const data::SampleSource& source, long consumed, const TrainingConfig& c,
                        int microbatches, int replica, int replicas, std::vector<int>& tokens) {
  const int b = c.micro_batch_size, s = c.model.seq_length;
  tokens.resize((size_t)microbatches * b * (s + 1));
  for (int i = 0; i < microbatches; ++i)
    for (int k = 0; k < b; ++k) {
      int* sample = tokens.data() + ((size_t)i * b + k) * (s + 1);
      source.sample(consumed + (long)i * b * replicas + (long)replica * b + k, sample);
      // --eod-mask-loss: the prediction made at an EOD input is not counted.
      if (c.packed.eod_mask_loss)
        for (int t = 0; t < s; ++t)
          if (token_id(sample[t]) == c.packed.eod) sample[t + 1] |= kUncountedTarget;
    }
}

long counted_targets(const std::vector<int>& tokens, int seq, comm::Communicator& data) {
  double count = 0;
  for (size_t i = 0; i < tokens.size(); ++i)
    count += i % (size_t)(seq + 1) != 0 && counted_target(tokens[i]);
  data.all_reduce(&count, 1, comm::ReduceOp::kSum);
  return (long)count;
}

}  // namespace trident::train
