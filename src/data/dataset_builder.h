#pragma once
// Builds the train / valid / test sample sources from --data-path and --split the way
// Megatron's BlendedMegatronDatasetBuilder does: every dataset is split by sequences,
// each split becomes a GPTDataset, and several datasets are blended by weight.
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "data/sample_source.h"

namespace trident::data {

struct WeightedPrefix {
  double weight;
  std::string prefix;
};

// "prefix" or "w1 prefix1 w2 prefix2 ..."; throws std::invalid_argument with the rule.
std::vector<WeightedPrefix> parse_data_path(const std::vector<std::string>& args);

struct DataSplits {
  std::shared_ptr<SampleSource> train, valid, test;  // null when a split has no share
};

struct DataRequest {
  std::vector<std::string> data_path;
  std::string split = "969,30,1";
  int seq_length = 0;
  std::uint32_t seed = 1234;
  std::string cache_path;
  long samples[3] = {0, 0, 0};  // train, valid, test
  bool loss_masks = false;      // --sft: each prefix's loss mask flags the targets it drops
  // --pack-documents: whole documents packed best-fit into samples (data/packed_dataset.h),
  // their tails padded with pad_id.
  bool pack_documents = false;
  int pad_id = 0;
};

DataSplits build_gpt_datasets(const DataRequest& request, std::ostream& log);

// Where a dataset's loss mask lies: <p>_loss_mask for a prefix <p>_document (as preprocess
// names them), else <prefix>_loss_mask.
std::string loss_mask_prefix(const std::string& prefix);

}  // namespace trident::data
