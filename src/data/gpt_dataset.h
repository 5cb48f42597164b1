#pragma once
// Megatron's GPTDataset over one split of an indexed dataset: a document index (the
// split's documents, shuffled per epoch with numpy's RandomState(seed)), a sample index
// (where each sample of seq_length + 1 tokens starts, spanning documents), and a shuffle
// index over samples. The three are cached beside the data as .npy files, keyed by
// everything that changes them, and rebuilt when stale.
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "data/sample_source.h"

namespace trident::data {

struct GPTDatasetSpec {
  std::string split_name;  // train, valid, test
  long first_sequence = 0;
  long end_sequence = 0;  // [first, end)
  long num_samples = 0;
  int seq_length = 0;
  std::uint32_t seed = 1234;
  std::string cache_dir;  // empty: <data dir>/cache
};

class GPTDataset : public SampleSource {
 public:
  GPTDataset(std::shared_ptr<const IndexedDataset> data, const GPTDatasetSpec& spec,
             std::ostream* log);
  long size() const override { return (long)shuffle_index_.size(); }
  // With a loss mask, a token the mask holds 0 for is flagged (config/token_flags.h): as a
  // target, the loss does not count it.
  void sample(long index, int* out) const override;
  // A dataset of the same documents and lengths, one value per token: 0 drops the target.
  void set_loss_mask(std::shared_ptr<const IndexedDataset> mask) { loss_mask_ = std::move(mask); }

  const std::vector<std::int32_t>& document_index() const { return document_index_; }
  const std::vector<std::int64_t>& sample_index() const { return sample_index_; }  // [n + 1][2]
  const std::vector<std::int64_t>& shuffle_index() const { return shuffle_index_; }
  const std::string& cache_prefix() const { return cache_prefix_; }
  bool loaded_from_cache() const { return from_cache_; }

 private:
  void build();
  // Sample `index`'s seq_length + 1 values of `from` (the tokens, or the loss mask).
  void read_sample(const IndexedDataset& from, long index, std::vector<int>* values) const;
  bool load_cache(const std::string& description);
  void save_cache(const std::string& description) const;

  std::shared_ptr<const IndexedDataset> data_;
  std::shared_ptr<const IndexedDataset> loss_mask_;
  GPTDatasetSpec spec_;
  std::vector<std::int32_t> document_index_;
  std::vector<std::int64_t> sample_index_;
  std::vector<std::int64_t> shuffle_index_;
  std::string cache_prefix_;
  bool from_cache_ = false;
};

// Megatron's split of n sequences by weights such as "969,30,1": [begin, end) per split.
std::vector<std::pair<long, long>> split_ranges(const std::vector<double>& weights, long n);
// Parses "969,30,1" (or "98 2 0"); up to three non-negative numbers with a positive sum.
std::vector<double> parse_split(const std::string& split);

}  // namespace trident::data
