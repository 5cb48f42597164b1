#pragma once
// Megatron's num-microbatches calculator: the global batch size as a function of the
// samples consumed so far. Without ramp-up it is constant; with --rampup-batch-size
// <start> <increment> <samples> it starts at `start` and grows by `increment` every
// samples / ((global - start) / increment) consumed samples until it reaches the global
// batch size (MT-NLG: 32 -> 1920 over 250B tokens).
#include <vector>

namespace trident {

struct BatchRampup {
  long start = 0;
  long increment = 0;
  long samples = 0;
};

class GlobalBatchSchedule {
 public:
  // rampup.start == 0: no ramp-up.
  GlobalBatchSchedule(long global_batch, BatchRampup rampup);

  // The global batch of the iteration that starts after `consumed_samples`.
  long at(long consumed_samples) const;
  // Every size the schedule passes through, smallest first.
  std::vector<long> sizes() const;
  bool ramps() const { return rampup_.start > 0; }
  long final_size() const { return global_batch_; }
  // Iterations that consume `train_samples` (Megatron's update_train_iters: the ramp-up
  // runs while consumed <= ramp-up samples, then whole global batches; a partial last
  // batch is dropped). A length that ends within the ramp-up counts the whole batches that
  // fit in it (Megatron's loop would train the ramp-up out).
  long iterations_for(long train_samples) const;
  // Samples consumed by the first `iterations` iterations.
  long samples_after(long iterations) const;

 private:
  long global_batch_;
  BatchRampup rampup_;
  double samples_per_increment_ = 0;
};

}  // namespace trident
