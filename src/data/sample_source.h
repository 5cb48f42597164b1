#pragma once
// Where training samples come from: sample i is seq_length + 1 token ids.
namespace trident::data {

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  // Number of samples, or -1 for an unbounded stream (mock data).
  virtual long size() const = 0;
  virtual void sample(long index, int* out) const = 0;
};

}  // namespace trident::data
