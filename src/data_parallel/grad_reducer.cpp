#include "data_parallel/grad_reducer.h"

#include <algorithm>
#include <chrono>
#include <ostream>

namespace trident::data_parallel {

GradientReducer::GradientReducer(Parameters& params, comm::Communicator& data,
                                 ReducerOptions options)
    : params_(params), data_(data), options_(options) {
  const auto& specs = params.layout().specs();
  const int n = (int)specs.size();
  if (options.distributed_optimizer) {
    // One bucket over the whole buffer, padded so it splits exactly: no per-tensor
    // divisibility rule (llm.c's limitation), any d works.
    params.pad_to_multiple(16L * data.size());
    buckets_.push_back({0, n, 0, params.size()});
    shard_begin_ = params.size() / data.size() * data.rank();
    shard_end_ = shard_begin_ + params.size() / data.size();
  } else {
    shard_end_ = params.size();
    long filled = 0;
    int end = n;
    for (int k = n - 1; k >= 0; --k) {  // reverse order of use
      filled += specs[k].numel();
      if (filled >= options.bucket_floats || k == 0) {
        long lo = specs[k].offset;
        long hi = end == n ? params.size() : specs[end].offset;
        buckets_.push_back({k, end, lo, hi - lo});
        end = k;
        filled = 0;
      }
    }
  }
  bucket_of_spec_.assign(n, 0);
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (int k = buckets_[b].spec_begin; k < buckets_[b].spec_end; ++k) bucket_of_spec_[k] = (int)b;
  remaining_.resize(buckets_.size());
  launched_.resize(buckets_.size());
}

void GradientReducer::arm() {
  armed_ = options_.overlap && !options_.distributed_optimizer && data_.size() > 1;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    remaining_[b] = buckets_[b].spec_end - buckets_[b].spec_begin;
    launched_[b] = false;
  }
  launched_early_ = 0;
}

void GradientReducer::mark_ready(int begin, int end) {
  if (!armed_) return;
  for (auto& r : requests_) r->test();  // progress the buckets already in flight
  for (int k = begin; k < end; ++k) {
    int b = bucket_of_spec_[k];
    if (--remaining_[b] == 0 && !launched_[b]) {
      launch(b);
      ++launched_early_;
    }
  }
}

void GradientReducer::launch(size_t b) {
  launched_[b] = true;
  if (on_launch_)
    on_launch_((options_.distributed_optimizer ? "reduce-scatter bucket " : "all-reduce bucket ") +
               std::to_string(b));
  float* grads = params_.grads() + buckets_[b].offset;
  if (options_.distributed_optimizer) {  // in place: the sum lands in this rank's shard
    const long piece = buckets_[b].floats / data_.size();
    requests_.push_back(data_.ireduce_scatter(grads, grads, piece));
  } else {
    requests_.push_back(data_.iall_reduce(grads, buckets_[b].floats, comm::ReduceOp::kSum));
  }
}

void GradientReducer::finish() {
  armed_ = false;
  if (data_.size() == 1) return;
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!launched_[b]) launch(b);
  auto start = std::chrono::steady_clock::now();
  for (auto& r : requests_) r->wait();
  last_wait_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  requests_.clear();
  for (size_t b = 0; b < buckets_.size(); ++b) launched_[b] = false;
}

void GradientReducer::all_gather_values() {
  if (!options_.distributed_optimizer || data_.size() == 1) return;
  const long piece = shard_end_ - shard_begin_;
  data_.all_gather(params_.values() + shard_begin_, params_.values(), piece);  // in place
}

void GradientReducer::print(std::ostream& os) const {
  os << "data-parallel buckets (" << buckets_.size() << ", reverse order of use):";
  for (const Bucket& b : buckets_) os << " [" << b.offset << ", +" << b.floats << ")";
  if (options_.distributed_optimizer)
    os << "; this rank's optimizer shard [" << shard_begin_ << ", " << shard_end_ << ")";
  os << "\n";
}

}  // namespace trident::data_parallel
