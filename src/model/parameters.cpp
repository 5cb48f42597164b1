#include "model/parameters.h"

#include <cmath>

#include "core/random.h"
#include "kernels/elementwise.h"

namespace trident {

Parameters::Parameters(ParameterLayout layout)
    : layout_(std::move(layout)), values_(layout_.total(), 0.f), grads_(layout_.total(), 0.f) {}

ParamRef Parameters::get(const std::string& name) {
  const ParamSpec& s = layout_.find(name);
  return {values_.data() + s.offset, grads_.data() + s.offset, s.numel()};
}

void Parameters::pad_to_multiple(long multiple) {
  long size = (long)values_.size(), padded = (size + multiple - 1) / multiple * multiple;
  values_.resize(padded, 0.f);
  grads_.resize(padded, 0.f);
}

void Parameters::zero_grads() {
  kernels::fill(grads_.data(), 0.f, (long)grads_.size());
}

void Parameters::initialize(std::uint64_t seed, float std, int num_layers) {
  const float scaled_std = std / std::sqrt(2.f * num_layers);
  for (const ParamSpec& s : layout_.specs()) {
    float* dst = values_.data() + s.offset;
    long n = s.numel();
    std::uint64_t stream = hash_string(s.name);
    switch (s.init) {
      case InitKind::kZeros:
        kernels::fill(dst, 0.f, n);
        break;
      case InitKind::kOnes:
        kernels::fill(dst, 1.f, n);
        break;
      case InitKind::kNormal:
      case InitKind::kScaledNormal: {
        float sigma = s.init == InitKind::kNormal ? std : scaled_std;
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; ++i)
          dst[i] = (float)(sigma * normal_at(seed, stream, s.global_index(i)));
        break;
      }
    }
  }
}

}  // namespace trident
