#pragma once
// Deterministic synthetic training data, like Megatron's --mock-data, but with a pattern a
// model can learn: each sample is a run of arithmetic progressions (start a, stride k,
// modulo a small alphabet) separated by end-of-document tokens. After two tokens of a
// progression the rest is predictable, so a falling loss shows learning.
#include <cstdint>

#include "data/sample_source.h"

namespace trident::data {

class MockGPTDataset : public SampleSource {
 public:
  MockGPTDataset(int vocab_size, int seq_length, std::uint64_t seed);
  // Writes seq_length + 1 tokens of sample `index` (any index; the stream is unbounded).
  long size() const override { return -1; }
  void sample(long index, int* out) const override;
  int eod() const { return eod_; }

 private:
  int seq_length_;
  int alphabet_;
  int eod_;
  std::uint64_t seed_;
};

}  // namespace trident::data
