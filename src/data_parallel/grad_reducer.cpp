#include "data_parallel/grad_reducer.h"

#include <algorithm>
#include <chrono>
#include <ostream>

namespace trident::data_parallel {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

GradientReducer::GradientReducer(Parameters& params, comm::Communicator& data,
                                 ReducerOptions options)
    : params_(params), data_(data), options_(options) {
  const auto& specs = params.layout().specs();
  const int n = (int)specs.size();
  if (options.distributed_optimizer) {
    // Padded so the buffer splits exactly into contiguous shards: no per-tensor
    // divisibility rule (llm.c's limitation), any d works.
    params.pad_to_multiple(16L * data.size());
    shard_begin_ = params.size() / data.size() * data.rank();
    shard_end_ = shard_begin_ + params.size() / data.size();
  } else {
    shard_end_ = params.size();
  }
  std::vector<std::pair<long, long>> tensors;
  for (const ParamSpec& spec : specs) tensors.emplace_back(spec.offset, spec.numel());
  buckets_ = gradient_buckets(tensors, params.size(), options.bucket_floats, options.vocabulary);
  bucket_of_spec_.assign(n, -1);  // -1: in on-demand buckets
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (int k = buckets_[b].spec_begin; k < buckets_[b].spec_end && !buckets_[b].on_demand; ++k)
      bucket_of_spec_[k] = (int)b;
  remaining_.resize(buckets_.size());
  launched_.resize(buckets_.size());
  held_back_.resize(buckets_.size());
  // On demand: untouched until prepare_range (the sparse embedding's never, outside the shard).
  clean_.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) clean_[b] = buckets_[b].on_demand;
  gathers_.resize(buckets_.size());
  reductions_.resize(buckets_.size());
}

void GradientReducer::hold_back_spec(int spec) {
  if (bucket_of_spec_[spec] >= 0) held_back_[bucket_of_spec_[spec]] = true;
}

void GradientReducer::arm() {
  armed_ = options_.overlap && data_.size() > 1;
  backward_pending_ = true;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    remaining_[b] = buckets_[b].spec_end - buckets_[b].spec_begin;
    launched_[b] = false;
    if (!buckets_[b].on_demand) clean_[b] = false;
  }
  launched_early_ = 0;
}

void GradientReducer::progress() {
  for (size_t i = 0; i < in_flight_.size();) {
    const size_t b = in_flight_[i];
    if (reductions_[b]->test())
      complete_reduction(b);  // takes it out of in_flight_
    else
      ++i;
  }
  for (auto& g : gathers_)
    if (g) g->test();
}

void GradientReducer::mark_ready(int begin, int end) {
  if (!armed_) return;
  progress();  // the buckets already in flight
  for (int k = begin; k < end; ++k) {
    int b = bucket_of_spec_[k];
    if (b >= 0 && --remaining_[b] == 0 && !launched_[b] && !held_back_[b]) {
      launch(b);
      ++launched_early_;
    }
  }
}

std::vector<long> GradientReducer::owner_counts(size_t b) const {
  const long lo = buckets_[b].offset;
  return shard_counts(lo, lo + buckets_[b].floats, params_.size(), data_.size());
}

void GradientReducer::launch(size_t b) {
  launched_[b] = true;
  while (shards_gradients() &&
         (int)in_flight_.size() >= sharded_buckets_in_flight(options_.shard_parameters))
    complete_reduction(in_flight_.front());
  if (on_launch_)
    on_launch_((options_.distributed_optimizer ? "reduce-scatter bucket " : "all-reduce bucket ") +
               std::to_string(b));
  // Only the bucket's gradients are final: the layers below have not written theirs.
  const long begin = buckets_[b].offset;
  float* grads = params_.grads_for(begin, begin + buckets_[b].floats) + begin;
  if (options_.distributed_optimizer)  // in place: the sums land in the owners' shards
    reductions_[b] = data_.ireduce_scatter_v(grads, owner_counts(b));
  else
    reductions_[b] = data_.iall_reduce(grads, buckets_[b].floats, comm::ReduceOp::kSum);
  in_flight_.push_back(b);
}

void GradientReducer::complete_reduction(size_t b) {
  reductions_[b]->wait();
  reductions_[b].reset();
  in_flight_.erase(std::find(in_flight_.begin(), in_flight_.end(), b));
  if (shards_gradients()) release_bucket(b);
}

void GradientReducer::release_bucket(size_t b) {
  const long lo = buckets_[b].offset, hi = lo + buckets_[b].floats;
  const long page = 512L * 1024;  // 2 MiB
  long begin = lo / page * page, end = std::min(params_.size(), (hi + page - 1) / page * page);
  for (size_t k = 0; k < buckets_.size(); ++k) {
    const long k_lo = buckets_[k].offset, k_hi = k_lo + buckets_[k].floats;
    if (k == b || clean_[k] || k_hi <= begin || k_lo >= end) continue;
    if (k_hi <= lo) begin = std::max(begin, k_hi);
    if (k_lo >= hi) end = std::min(end, k_lo);
  }
  release_outside_shard(begin, end);
  clean_[b] = true;
}

// What lies outside the shard holds other ranks' partial sums: zero it (for the next
// micro-batch's accumulation) and give its memory back.
void GradientReducer::release_outside_shard(long begin, long end) {
  params_.release_grads(begin, std::min(end, shard_begin_));
  params_.release_grads(std::max(begin, shard_end_), end);
}

void GradientReducer::finish() {
  armed_ = false;
  backward_pending_ = false;
  if (data_.size() == 1) return;
  finish_param_gather();
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!launched_[b] && !buckets_[b].on_demand) launch(b);
  auto start = std::chrono::steady_clock::now();
  while (!in_flight_.empty()) complete_reduction(in_flight_.front());
  last_wait_seconds_ = seconds_since(start);
  for (size_t b = 0; b < buckets_.size(); ++b) launched_[b] = false;
}

void GradientReducer::finish_micro_batch() {
  if (!shards_gradients() || !backward_pending_) return;
  armed_ = false;
  backward_pending_ = false;
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!launched_[b] && !held_back_[b] && !buckets_[b].on_demand) launch(b);
  while (!in_flight_.empty()) complete_reduction(in_flight_.front());
  for (size_t b = 0; b < buckets_.size(); ++b) launched_[b] = false;
}

void GradientReducer::reduce_range(long begin, long end) {
  if (!shards_gradients()) return;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bucket = buckets_[b];
    if (!bucket.on_demand || bucket.offset < begin || bucket.offset >= end) continue;
    if (reductions_[b]) complete_reduction(b);
    launch(b);
  }
}

void GradientReducer::complete_range(long begin, long end) {
  for (size_t i = 0; i < in_flight_.size();) {
    const Bucket& bucket = buckets_[in_flight_[i]];
    if (bucket.offset < end && begin < bucket.offset + bucket.floats)
      complete_reduction(in_flight_[i]);  // takes it out of in_flight_
    else
      ++i;
  }
}

void GradientReducer::prepare_range(long begin, long end) {
  complete_range(begin, end);
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (buckets_[b].on_demand && buckets_[b].offset >= begin && buckets_[b].offset < end)
      clean_[b] = false;
}

void GradientReducer::zero_grads() {
  if (!shards_gradients()) return params_.zero_grads();
  release_outside_shard(0, params_.size());
  std::fill(params_.grads() + shard_begin_, params_.grads() + shard_end_, 0.f);
}

void GradientReducer::all_gather_values() {
  if (!options_.distributed_optimizer || options_.shard_parameters || data_.size() == 1) return;
  if (!options_.overlap_param_gather) {
    auto start = std::chrono::steady_clock::now();
    const long piece = shard_end_ - shard_begin_;
    data_.all_gather(params_.values() + shard_begin_, params_.values(), piece);  // in place
    last_gather_wait_seconds_ = seconds_since(start);
    return;
  }
  for (size_t b : gather_order()) start_gather(b);
}

std::vector<size_t> GradientReducer::gather_order() const {
  std::vector<size_t> order;
  for (size_t b = buckets_.size(); b-- > 0;) order.push_back(b);  // the embedding's first
  return order;
}

std::pair<long, long> GradientReducer::shard_part(size_t b) const {
  const long lo = buckets_[b].offset, hi = lo + buckets_[b].floats;
  return {std::max(lo, shard_begin_),
          std::max(std::max(lo, shard_begin_), std::min(hi, shard_end_))};
}

void GradientReducer::start_gather(size_t b) {
  if (b == gather_order().front()) {  // a new round of gathers
    finish_param_gather();
    last_gather_wait_seconds_ = gather_wait_seconds_;
    gather_wait_seconds_ = 0;
  }
  // Each bucket's low-precision copy is re-rounded as its gather completes, so the copy
  // counts as current for the lazy whole-buffer refresh.
  float* values = params_.values();
  params_.mark_low_precision_current();
  gathers_[b] = data_.iall_gather_v(values + buckets_[b].offset, owner_counts(b));
}

void GradientReducer::complete_gather(size_t b) {
  auto start = std::chrono::steady_clock::now();
  gathers_[b]->wait();
  gather_wait_seconds_ += seconds_since(start);
  gathers_[b].reset();
  params_.refresh_low_precision(buckets_[b].offset, buckets_[b].offset + buckets_[b].floats);
}

void GradientReducer::params_needed(int begin, int end) {
  bool any = false;
  for (auto& g : gathers_)
    if (g) any = true, g->test();  // progress every gather, not just the one needed now
  if (!any) return;
  for (int k = begin; k < end; ++k)
    if (bucket_of_spec_[k] >= 0 && gathers_[bucket_of_spec_[k]])
      complete_gather(bucket_of_spec_[k]);
}

void GradientReducer::finish_param_gather() {
  for (size_t b = buckets_.size(); b-- > 0;)
    if (gathers_[b]) complete_gather(b);
}

void GradientReducer::print(std::ostream& os) const {
  os << "data-parallel buckets (" << buckets_.size() << ", reverse order of use):";
  for (const Bucket& b : buckets_) os << " [" << b.offset << ", +" << b.floats << ")";
  if (options_.distributed_optimizer)
    os << "; this rank's optimizer shard [" << shard_begin_ << ", " << shard_end_ << ")";
  if (shards_gradients()) os << ", the only gradients it keeps (sharded gradients)";
  os << "\n";
}

}  // namespace trident::data_parallel
