#pragma once
// Whole documents packed into samples (supervised fine-tuning's conversations): best-fit
// decreasing puts each document, longest first, into the sample with the least room that
// still holds it, so no document is split unless it is longer than a sample
// (seq_length + 1 tokens), and then only into sample-sized pieces. A sample's unused tail is
// the pad id (the end-of-document token) as uncounted targets. Samples are drawn epoch by
// epoch, each a shuffle of all packed samples with numpy's RandomState(seed). Train with
// --reset-attention-mask and --reset-position-ids so the documents do not see each other.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "data/sample_source.h"

namespace trident::data {

struct PackedDatasetSpec {
  std::string split_name;                     // train, valid, test
  long first_sequence = 0, end_sequence = 0;  // the split's documents [first, end)
  long num_samples = 0;
  int seq_length = 0;
  std::uint32_t seed = 1234;
  int pad_id = 0;
};

// A document, or a sample-sized piece of a longer one.
struct DocumentPiece {
  long document;
  int offset, length;
};

// Best-fit decreasing of the pieces of documents [first, end) of `sizes` into bins of
// `capacity` tokens: the bins, each its pieces in the order placed.
std::vector<std::vector<DocumentPiece>> best_fit_bins(const std::vector<int>& sizes, long first,
                                                      long end, int capacity);

class PackedDataset : public SampleSource {
 public:
  // loss_mask (may be null): the documents' loss masks; their zeros are flagged targets.
  PackedDataset(std::shared_ptr<const IndexedDataset> data,
                std::shared_ptr<const IndexedDataset> loss_mask, const PackedDatasetSpec& spec);
  long size() const override { return (long)order_.size(); }
  void sample(long index, int* out) const override;
  const std::vector<std::vector<DocumentPiece>>& bins() const { return bins_; }

 private:
  std::shared_ptr<const IndexedDataset> data_, loss_mask_;
  PackedDatasetSpec spec_;
  std::vector<std::vector<DocumentPiece>> bins_;
  std::vector<std::int64_t> order_;  // sample -> bin
};

}  // namespace trident::data
