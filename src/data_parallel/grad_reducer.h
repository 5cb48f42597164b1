#pragma once
// Data-parallel gradient reduction over one chunk's flat gradient buffer. Tensors are
// grouped into buckets in reverse layout order (the order backward finishes them, as
// Megatron's DDP does); with overlap, a bucket's non-blocking reduction starts as soon as
// every tensor in it is final in the step's last backward, while backward continues.
// Plain data parallelism all-reduces each bucket. With the distributed optimizer (ZeRO-1)
// rank r of the data-parallel group owns floats [r S / d, (r + 1) S / d) of the padded
// buffer: each bucket is reduce-scattered onto the owners of its pieces, and after the
// update the owners' values are all-gathered back — bucket by bucket in forward order,
// overlapped with the next forward when asked (--overlap-param-gather).
// With sharded gradients (ZeRO-2) buckets are reduce-scattered after every micro-batch's
// backward, not only the last: the owners' shards accumulate the reduced sums (the other
// ranks' copies of a shard are zero again, so the next reduce-scatter adds just their new
// gradients), and everything outside this rank's shard is given back to the system once its
// reduction completes. At most two buckets are in flight, so MPI's temporaries stay small.
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "data_parallel/buckets.h"
#include "parameters/parameters.h"

namespace trident::data_parallel {

struct ReducerOptions {
  long bucket_floats = 40'000'000;  // Megatron's default with overlap
  bool overlap = true;
  bool distributed_optimizer = false;
  bool overlap_param_gather = false;  // distributed optimizer: all-gather during next forward
  bool shard_gradients = false;       // ZeRO-2 (needs distributed_optimizer)
  // ZeRO-3 (needs shard_gradients): the weights stay sharded after the update; each unit is
  // gathered before it runs (data_parallel/param_gatherer.h), so there is no gather here.
  bool shard_parameters = false;
  // ZeRO-3: the vocabulary's tensors, in buckets of their own that reduce_range() reduces.
  VocabularyBlocks vocabulary;
};

// Buckets in flight at once with sharded gradients: two under ZeRO-2; one under ZeRO-3, whose
// point is the least memory (each bucket in reduction also holds MPI's temporaries, twice
// its size on the inner ranks of a reduction tree), while the next bucket fills still overlaps
// it with the backward.
inline constexpr int sharded_buckets_in_flight(bool shard_parameters) {
  return shard_parameters ? 1 : 2;
}

class GradientReducer {
 public:
  GradientReducer(Parameters& params, comm::Communicator& data, ReducerOptions options);
  // The bucket holding this spec starts only in finish(): its gradient is still changed
  // after backward (the tied word embedding, summed across pipeline stages first).
  void hold_back_spec(int spec);
  // Before the step's last backward of this chunk: from now on, ready tensors may launch.
  void arm();
  // Specs [begin, end) have final gradients; launches every bucket that became complete.
  void mark_ready(int spec_begin, int spec_end);
  // Sharded gradients: the on-demand buckets within [begin, end) (blocks of the output
  // layer's weight) hold this rank's new partial sums: reduce-scatter them now. Their
  // previous reductions complete first.
  void reduce_range(long begin, long end);
  // Completes the reductions in flight over [begin, end): before writing there.
  void complete_range(long begin, long end);
  // The same, before writing gradients of the on-demand buckets within [begin, end).
  void prepare_range(long begin, long end);
  // Lets in-flight reductions and gathers move (MPI progresses them only inside its calls).
  void progress();
  // Launches what is left and waits. After it, gradients are summed over the data-parallel
  // group: everywhere (all-reduce), or on this rank's shard (distributed optimizer).
  void finish();
  // Sharded gradients, between micro-batches: completes this micro-batch's reductions (all
  // buckets but a held-back one, which accumulates until finish()). Nothing to do when no
  // backward ran since the last call.
  void finish_micro_batch();
  // Before a step's first backward: zero gradients (sharded: only this rank's shard stays
  // in memory).
  void zero_grads();
  bool shards_gradients() const { return options_.shard_gradients && data_.size() > 1; }
  // The range this rank updates: everything, or its shard with the distributed optimizer.
  long shard_begin() const { return shard_begin_; }
  long shard_end() const { return shard_end_; }
  // Distributed optimizer: every rank's updated shard of the values, to every rank — at
  // once, or (overlap_param_gather) started here and completed bucket by bucket as
  // params_needed() asks for them.
  void all_gather_values();
  // The overlapped all-gather in pieces: buckets in the order the forward needs them, the
  // part of bucket b in this rank's shard (to update first), and its gather's start.
  std::vector<size_t> gather_order() const;
  std::pair<long, long> shard_part(size_t bucket) const;
  void start_gather(size_t bucket);
  bool overlaps_param_gather() const {
    return options_.overlap_param_gather && options_.distributed_optimizer &&
           !options_.shard_parameters && data_.size() > 1;
  }
  // Specs [begin, end) are about to be read: waits for the all-gather of their buckets.
  void params_needed(int spec_begin, int spec_end);
  // Completes every all-gather still in flight (before anything else reads the values).
  void finish_param_gather();
  const std::vector<Bucket>& buckets() const { return buckets_; }
  int launched_before_finish() const { return launched_early_; }
  // Seconds the last finish() waited for gradient reductions still in flight.
  double last_wait_seconds() const { return last_wait_seconds_; }
  // Seconds the last complete parameter all-gather kept the caller waiting (all of a
  // blocking one; the waits inside the forward for an overlapped one).
  double last_gather_wait_seconds() const { return last_gather_wait_seconds_; }
  void print(std::ostream& os) const;
  // Told the name of every bucket reduction as it starts (for the timeline).
  void set_launch_observer(std::function<void(const std::string&)> f) { on_launch_ = std::move(f); }

 private:
  void launch(size_t bucket);
  // Waits for bucket b's reduction; sharded gradients: gives back all of it but the shard.
  void complete_reduction(size_t bucket);
  void release_outside_shard(long begin, long end);
  // Sharded gradients: bucket b's part outside the shard goes, with the rest of the 2 MiB
  // pages at its edges where the buckets sharing them are clean.
  void release_bucket(size_t bucket);
  // Floats of bucket b in each rank's shard, in rank order (the uneven collectives' blocks).
  std::vector<long> owner_counts(size_t bucket) const;
  void complete_gather(size_t bucket);

  Parameters& params_;
  comm::Communicator& data_;
  ReducerOptions options_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_spec_;
  std::vector<int> remaining_;  // per bucket: specs not yet final
  std::vector<bool> launched_, held_back_;
  // Per bucket: nothing of it outside the shard is in memory, and nothing writes it until
  // the next backward (arm) or, on demand, prepare_range.
  std::vector<bool> clean_;
  std::vector<std::unique_ptr<comm::Request>> reductions_;  // per bucket, while in flight
  std::vector<size_t> in_flight_;                           // buckets, in launch order
  std::vector<std::unique_ptr<comm::Request>> gathers_;     // per bucket, while in flight
  bool armed_ = false;
  bool backward_pending_ = false;  // a backward ran since the last finish
  int launched_early_ = 0;
  double last_wait_seconds_ = 0, gather_wait_seconds_ = 0, last_gather_wait_seconds_ = 0;
  std::function<void(const std::string&)> on_launch_;
  long shard_begin_ = 0, shard_end_ = 0;
};

}  // namespace trident::data_parallel
