#include "parameters/parameters.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <unordered_map>

#include "core/normal_fill.h"
#include "core/random.h"
#include "kernels/elementwise.h"
#include "kernels/skinny_linear.h"

namespace trident {

namespace {
// Default-initialised: nothing written, nothing touched (the pages come on first write).
template <class T>
void assign_untouched(FirstTouchVector<T>& v, long n) {
  FirstTouchVector<T>(ZeroedAllocator<T>(false)).swap(v);
  v.resize((size_t)n);
}
}  // namespace

Parameters::Parameters(ParameterLayout layout, long pad_multiple, GradientMemory gradients,
                       ValueMemory values)
    : layout_(std::move(layout)), value_memory_(values) {
  long size = (layout_.total() + pad_multiple - 1) / pad_multiple * pad_multiple;
  if (values == ValueMemory::kSharded)
    assign_untouched(values_, size);
  else
    assign_parallel(values_, size, 0.f);
  if (gradients == GradientMemory::kTouched) assign_parallel(grads_, size, 0.f);
  if (gradients == GradientMemory::kOnFirstWrite) assign_untouched(grads_, size);
}

ParamRef Parameters::get(const std::string& name) {
  const ParamSpec& s = layout_.find(name);
  low_stale_ = true;
  handed_out_ = true;
  const std::uint16_t* low = low_.empty() ? nullptr : low_.data() + s.offset;
  float* grad = grads_.empty() ? nullptr : grads_.data() + s.offset;
  const void* panels = nullptr;
  for (const PanelCopy& c : panel_copies_)
    if (c.offset == s.offset) panels = panels_.data() + c.at;
  return {values_.data() + s.offset, grad, s.numel(), low, panels};
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
  const long copy = p == kernels::Precision::kFp32 ? 0 : (long)values_.size();
  if (values_sharded())
    assign_untouched(low_, copy);
  else
    assign_parallel<std::uint16_t>(low_, copy, 0);
  low_stale_ = true;
}

void Parameters::refresh_low_precision() {
  if (!low_stale_ || (low_.empty() && panels_.empty()) || values_sharded()) return;
  if (!low_.empty() && low_precision_ == kernels::Precision::kBf16)
    kernels::to_bf16(values_.data(), low_.data(), (long)low_.size());
  else if (!low_.empty())
    kernels::to_fp16(values_.data(), low_.data(), (long)low_.size());
  refresh_decode_panels();
  low_stale_ = false;
}

void Parameters::set_decode_panels(const std::vector<std::string>& names) {
  if (handed_out_) throw std::logic_error("Parameters::set_decode_panels after get()");
  if (low_precision_ == kernels::Precision::kFp16)
    throw std::logic_error("decode panels are fp32 or bf16");
  panel_copies_.clear();
  long floats = 0;
  for (const std::string& name : names) {
    const ParamSpec& s = layout_.find(name);
    if (s.local_shape.size() != 2) throw std::logic_error("decode panels of a non-matrix " + name);
    const int out = (int)s.local_shape[0], in = (int)s.local_shape[1];
    panel_copies_.push_back({s.offset, out, in, floats});
    const long elements = kernels::panel_elements(low_precision_, out, in);
    const long need = low_precision_ == kernels::Precision::kBf16 ? (elements + 1) / 2 : elements;
    floats += (need + 15) / 16 * 16;  // each copy starts on a cache line
  }
  assign_parallel(panels_, floats, 0.f);
  low_stale_ = true;
}

void Parameters::refresh_decode_panels() {
  for (const PanelCopy& c : panel_copies_) {
    if (low_precision_ == kernels::Precision::kBf16)
      kernels::pack_panels_bf16(low_.data() + c.offset, c.out, c.in,
                                reinterpret_cast<kernels::bf16_t*>(panels_.data() + c.at));
    else
      kernels::pack_panels(values_.data() + c.offset, c.out, c.in, panels_.data() + c.at);
  }
}

void Parameters::refresh_low_precision(long begin, long end) {
  if (low_.empty()) return;
  if (low_precision_ == kernels::Precision::kBf16)
    kernels::to_bf16(values_.data() + begin, low_.data() + begin, end - begin);
  else
    kernels::to_fp16(values_.data() + begin, low_.data() + begin, end - begin);
}

void Parameters::zero_grads() {
  if (grads_.empty()) return;
  float* at = grads_.data();  // the gaps between the deferred spans are filled now
  deferred_zero_.for_each_span([&](float* begin, long floats) {
    kernels::fill(at, 0.f, (long)(begin - at));
    at = begin + floats;
  });
  kernels::fill(at, 0.f, (long)(grads_.data() + grads_.size() - at));
  deferred_zero_.mark_pending();
}

void Parameters::defer_zeroing(const ParamRef& tensor) {
  if (grads_.empty() || !tensor.grad) return;
  if (tensor.grad < grads_.data() || tensor.grad + tensor.numel > grads_.data() + grads_.size())
    throw std::logic_error("Parameters::defer_zeroing: a gradient outside this buffer");
  deferred_zero_.add_span(tensor.grad, tensor.numel);
}

void Parameters::release_grads(long begin, long end) {
  if (end > begin) release_pages(grads_.data() + begin, (size_t)(end - begin) * sizeof(float));
}

void Parameters::release_values(long begin, long end) {
  if (end <= begin) return;
  release_pages(values_.data() + begin, (size_t)(end - begin) * sizeof(float));
  if (!low_.empty())
    release_pages(low_.data() + begin, (size_t)(end - begin) * sizeof(std::uint16_t));
}

void Parameters::release_low_precision(long begin, long end) {
  if (end > begin && !low_.empty())
    release_pages(low_.data() + begin, (size_t)(end - begin) * sizeof(std::uint16_t));
}

void Parameters::initialize(std::uint64_t seed, float std, int num_layers,
                            const std::function<void(double)>& progress, long begin, long end) {
  const float scaled_std = std / std::sqrt(2.f * num_layers);
  if (end < 0) end = (long)values_.size();
  for (const ParamSpec& s : layout_.specs()) {
    // The part of the tensor inside [begin, end): elements [first, first + n).
    const long first = std::max(0L, begin - s.offset);
    const long n = std::min(s.numel(), end - s.offset) - first;
    if (n <= 0) continue;
    float* dst = values_.data() + s.offset;
    std::uint64_t stream = hash_string(s.name);
    switch (s.init) {
      case InitKind::kZeros:
        kernels::fill(dst + first, 0.f, n);
        break;
      case InitKind::kOnes:
        kernels::fill(dst + first, 1.f, n);
        break;
      case InitKind::kNormal:
      case InitKind::kScaledNormal: {
        const float sigma = s.init == InitKind::kNormal ? std : scaled_std;
        // Runs of consecutive global indices (a shard's rows or column blocks), eight
        // draws at a time; any split gives the one-process values.
        constexpr long kBlock = 1 << 14;
#pragma omp parallel for schedule(static)
        for (long b = first; b < first + n; b += kBlock) {
          const long end = std::min(first + n, b + kBlock);
          for (long i = b, run = 0; i < end; i += run) {
            run = std::min(end - i, s.contiguous_run(i));
            normal_fill(dst + i, run, sigma, seed, stream, (std::uint64_t)s.global_index(i));
          }
        }
        break;
      }
    }
    if (progress) progress((double)(s.offset + first + n) / (double)values_.size());
  }
}

void copy_shared_tensors(const Parameters& from, Parameters& to) {
  std::unordered_map<std::string, const ParamSpec*> source;
  for (const ParamSpec& s : from.layout().specs()) source[s.name] = &s;
  float* values = to.values();
  for (const ParamSpec& s : to.layout().specs()) {
    const auto it = source.find(s.name);
    if (it == source.end()) continue;
    if (it->second->numel() != s.numel())
      throw std::logic_error(s.name + ": copied between different slices");
    std::copy_n(from.values() + it->second->offset, s.numel(), values + s.offset);
  }
}

}  // namespace trident
