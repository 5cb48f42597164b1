#pragma once
// One flat buffer of parameters and one of gradients per rank (llm.c style): the
// optimizer, clipping and data-parallel reduction all see a single contiguous range.
#include <cstdint>
#include <vector>

#include "model/parameter_layout.h"

namespace trident {

struct ParamRef {
  float* value;
  float* grad;
  long numel;
};

class Parameters {
 public:
  explicit Parameters(ParameterLayout layout);
  const ParameterLayout& layout() const { return layout_; }
  ParamRef get(const std::string& name);
  float* values() { return values_.data(); }
  float* grads() { return grads_.data(); }
  const float* values() const { return values_.data(); }
  const float* grads() const { return grads_.data(); }
  long size() const { return (long)values_.size(); }
  void zero_grads();
  // Grows both buffers with zeros to a multiple of `multiple` floats (the distributed
  // optimizer splits the buffer exactly over the data-parallel ranks).
  void pad_to_multiple(long multiple);
  // normal(0, std) weights, std / sqrt(2 * layers) for output projections, LayerNorm 1/0,
  // biases 0; every element drawn from its global index, so any tensor-parallel split
  // starts from the same model.
  void initialize(std::uint64_t seed, float std, int num_layers);

 private:
  ParameterLayout layout_;
  std::vector<float> values_;
  std::vector<float> grads_;
};

}  // namespace trident
