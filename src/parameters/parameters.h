#pragma once
// One flat buffer of parameters and one of gradients per rank (llm.c style): the
// optimizer, clipping and data-parallel reduction all see a single contiguous range.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/deferred_zero.h"
#include "core/first_touch.h"
#include "kernels/low_precision.h"
#include "parameters/parameter_layout.h"

namespace trident {

struct ParamRef {
  float* value;
  float* grad;
  long numel;
  const std::uint16_t* low = nullptr;  // bf16 / fp16 copy for matrix products, if any
  // Generation: the weight again in the panel layout of the decode products
  // (kernels/skinny_linear.h), fp32 or bf16 like the products; null if none.
  const void* panels = nullptr;
};

// The gradient buffer: none (inference; grads() and ParamRef::grad are null), touched at
// allocation, or left for the first write (sharded gradients, ZeRO-2: most of the buffer is
// given back after each reduction, see release_grads).
enum class GradientMemory { kNone, kTouched, kOnFirstWrite };

// The weight buffer (and its 16-bit copy): touched at allocation, or sharded (ZeRO-3: only
// this rank's shard stays; a unit's other weights are all-gathered into place before it runs
// and given back after, see data_parallel/param_gatherer.h).
enum class ValueMemory { kTouched, kSharded };

class Parameters {
 public:
  // pad_multiple: the buffers' length is rounded up to it (the distributed optimizer
  // splits them exactly over the data-parallel ranks).
  explicit Parameters(ParameterLayout layout, long pad_multiple = 16,
                      GradientMemory gradients = GradientMemory::kTouched,
                      ValueMemory values = ValueMemory::kTouched);
  // ParamRefs and deferred spans point into the buffers: a copy would point into these.
  Parameters(const Parameters&) = delete;
  Parameters& operator=(const Parameters&) = delete;
  Parameters(Parameters&&) = default;
  Parameters& operator=(Parameters&&) = default;
  const ParameterLayout& layout() const { return layout_; }
  ParamRef get(const std::string& name);
  // Writable access marks the 16-bit copy stale.
  float* values() {
    low_stale_ = true;
    return values_.data();
  }
  // The gradients as they stand: spans whose zeroing was deferred and that no product has
  // written since are filled first (see defer_zeroing).
  float* grads() {
    deferred_zero_.materialize_all();
    return grads_.empty() ? nullptr : grads_.data();
  }
  const float* values() const { return values_.data(); }
  const float* grads() const {
    deferred_zero_.materialize_all();
    return grads_.empty() ? nullptr : grads_.data();
  }
  // The same with only floats [begin, end) made current (a bucket reduced while the
  // backward goes on: the layers below have not written theirs yet).
  float* grads_for(long begin, long end) {
    if (grads_.empty()) return nullptr;
    deferred_zero_.materialize(grads_.data() + begin, grads_.data() + end);
    return grads_.data();
  }
  bool has_gradients() const { return !grads_.empty(); }
  long size() const { return (long)values_.size(); }
  // Zeroes the gradients; the gradients of defer_zeroing's tensors only read as zeros (their
  // first product writes them, through deferred_zero()).
  void zero_grads();
  // The gradient of `tensor` (from get(), or adjacent tensors as one) is written whole by one
  // product per micro-batch that asks deferred_zero() first (a linear layer's weight through
  // kernels::mixed_linear): zero_grads leaves it to that product. Before the first zero_grads.
  void defer_zeroing(const ParamRef& tensor);
  DeferredZero* deferred_zero() { return grads_.empty() ? nullptr : &deferred_zero_; }
  // Zeroes gradients [begin, end) and gives their whole 2 MiB blocks back to the system
  // (core/first_touch.h release_pages): they read as zero until written again.
  void release_grads(long begin, long end);
  // Sharded values: zeroes values [begin, end) and their 16-bit copy and gives their whole
  // 2 MiB blocks back, as release_grads.
  void release_values(long begin, long end);
  // Gives back the 16-bit copy of [begin, end) alone.
  void release_low_precision(long begin, long end);
  bool values_sharded() const { return value_memory_ == ValueMemory::kSharded; }
  // Grows both buffers with zeros to a multiple of `multiple` floats (the distributed
  // optimizer splits the buffer exactly over the data-parallel ranks).
  void pad_to_multiple(long multiple);
  // normal(0, std) weights, std / sqrt(2 * layers) for output projections, LayerNorm 1/0,
  // biases 0; every element drawn from its global index, so any tensor-parallel split
  // starts from the same model.
  // progress (optional) is told the fraction of elements done after each tensor.
  // Only floats [begin, end) of the buffer are written (end < 0: to the end): a rank with
  // sharded values draws just its shard.
  void initialize(std::uint64_t seed, float std, int num_layers,
                  const std::function<void(double)>& progress = {}, long begin = 0, long end = -1);

  // Mixed precision: keep a bf16 or fp16 copy of every value for the matrix products (fp32
  // master values stay the ones the optimizer updates). Call before handing out ParamRefs.
  void set_low_precision(kernels::Precision p);
  kernels::Precision low_precision() const { return low_precision_; }
  // Re-rounds the copy if any value may have changed since it was made. Not with sharded
  // values: their copy is made range by range as units are gathered.
  void refresh_low_precision();
  // Re-rounds floats [begin, end) of the copy, whatever the staleness flag says (a range
  // another rank just sent).
  void refresh_low_precision(long begin, long end);
  // For an optimizer that writes the copy itself while updating every value: the copy
  // (nullptr without one), and the promise that it is current again.
  std::uint16_t* low_values() { return low_.empty() ? nullptr : low_.data(); }
  void mark_low_precision_current() { low_stale_ = false; }

  // Generation: also keep the named [out, in] weights in the decode products' panel layout,
  // in the products' precision (fp32, or bf16 with a bf16 copy). Call after
  // set_low_precision and before get(); refresh_low_precision() (the whole-buffer form)
  // fills them. Floats held: decode_panel_floats().
  void set_decode_panels(const std::vector<std::string>& names);
  long decode_panel_floats() const { return (long)panels_.size(); }

 private:
  ParameterLayout layout_;
  FirstTouchVector<float> values_;
  FirstTouchVector<float> grads_;
  // Filling a pending span on a const read is still reading zeros: the contents do not change.
  mutable DeferredZero deferred_zero_;
  ValueMemory value_memory_ = ValueMemory::kTouched;
  kernels::Precision low_precision_ = kernels::Precision::kFp32;
  FirstTouchVector<std::uint16_t> low_;
  bool low_stale_ = true;
  struct PanelCopy {
    long offset;  // the weight's offset in values_
    int out, in;
    long at;  // where its panels start in panels_, in floats
  };
  std::vector<PanelCopy> panel_copies_;
  FirstTouchVector<float> panels_;  // fp32 values, or bf16 pairs
  void refresh_decode_panels();
  bool handed_out_ = false;  // a ParamRef points into the buffers: they may not move
};

// Copies the values of every tensor `to` holds that `from` holds too (by name; the same
// tensor-parallel slice): between a chunk's buffers with experts inline and apart.
void copy_shared_tensors(const Parameters& from, Parameters& to);

}  // namespace trident
