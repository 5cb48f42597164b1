#include "model/parameters.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/normal_fill.h"
#include "core/random.h"
#include "kernels/elementwise.h"

namespace trident {

Parameters::Parameters(ParameterLayout layout, long pad_multiple, bool gradients)
    : layout_(std::move(layout)) {
  long size = (layout_.total() + pad_multiple - 1) / pad_multiple * pad_multiple;
  assign_parallel(values_, size, 0.f);
  if (gradients) assign_parallel(grads_, size, 0.f);
}

ParamRef Parameters::get(const std::string& name) {
  const ParamSpec& s = layout_.find(name);
  low_stale_ = true;
  handed_out_ = true;
  const std::uint16_t* low = low_.empty() ? nullptr : low_.data() + s.offset;
  float* grad = grads_.empty() ? nullptr : grads_.data() + s.offset;
  return {values_.data() + s.offset, grad, s.numel(), low};
}

void Parameters::pad_to_multiple(long multiple) {
  long size = (long)values_.size(), padded = (size + multiple - 1) / multiple * multiple;
  // ParamRefs point into the buffers; they must be padded before anyone holds one.
  if (padded != size && handed_out_)
    throw std::logic_error("Parameters::pad_to_multiple after the buffers were handed out");
  values_.resize(padded, 0.f);
  if (!grads_.empty()) grads_.resize(padded, 0.f);
}

void Parameters::set_low_precision(kernels::Precision p) {
  low_precision_ = p;
  if (handed_out_) throw std::logic_error("Parameters::set_low_precision after get()");
  assign_parallel<std::uint16_t>(low_, p == kernels::Precision::kFp32 ? 0 : (long)values_.size(),
                                 0);
  low_stale_ = true;
}

void Parameters::refresh_low_precision() {
  if (!low_stale_ || low_.empty()) return;
  if (low_precision_ == kernels::Precision::kBf16)
    kernels::to_bf16(values_.data(), low_.data(), (long)low_.size());
  else
    kernels::to_fp16(values_.data(), low_.data(), (long)low_.size());
  low_stale_ = false;
}

void Parameters::refresh_low_precision(long begin, long end) {
  if (low_.empty()) return;
  if (low_precision_ == kernels::Precision::kBf16)
    kernels::to_bf16(values_.data() + begin, low_.data() + begin, end - begin);
  else
    kernels::to_fp16(values_.data() + begin, low_.data() + begin, end - begin);
}

void Parameters::zero_grads() {
  kernels::fill(grads_.data(), 0.f, (long)grads_.size());
}

void Parameters::initialize(std::uint64_t seed, float std, int num_layers,
                            const std::function<void(double)>& progress) {
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
        const float sigma = s.init == InitKind::kNormal ? std : scaled_std;
        // Runs of consecutive global indices (a shard's rows or column blocks), eight
        // draws at a time; any split gives the one-process values.
        constexpr long kBlock = 1 << 14;
#pragma omp parallel for schedule(static)
        for (long b = 0; b < n; b += kBlock) {
          const long end = std::min(n, b + kBlock);
          for (long i = b, run = 0; i < end; i += run) {
            run = std::min(end - i, s.contiguous_run(i));
            normal_fill(dst + i, run, sigma, seed, stream, (std::uint64_t)s.global_index(i));
          }
        }
        break;
      }
    }
    if (progress) progress((double)(s.offset + n) / (double)values_.size());
  }
}

}  // namespace trident
