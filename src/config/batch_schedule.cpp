#include "config/batch_schedule.h"

#include <stdexcept>

namespace trident {

GlobalBatchSchedule::GlobalBatchSchedule(long global_batch, BatchRampup rampup)
    : global_batch_(global_batch), rampup_(rampup) {
  if (!ramps()) return;
  // The config validation reports these to the user; here they are broken invariants.
  if (rampup.increment <= 0 || rampup.start > global_batch ||
      (global_batch - rampup.start) % rampup.increment != 0)
    throw std::invalid_argument("batch ramp-up: start, increment and global batch disagree");
  const long increments = (global_batch - rampup.start) / rampup.increment;
  samples_per_increment_ = increments > 0 ? (double)rampup.samples / (double)increments : 0;
}

long GlobalBatchSchedule::at(long consumed) const {
  if (!ramps() || consumed > rampup_.samples || samples_per_increment_ <= 0) return global_batch_;
  const long steps = (long)((double)consumed / samples_per_increment_);
  return std::min(global_batch_, rampup_.start + steps * rampup_.increment);
}

std::vector<long> GlobalBatchSchedule::sizes() const {
  if (!ramps()) return {global_batch_};
  std::vector<long> out;
  for (long b = rampup_.start; b <= global_batch_; b += rampup_.increment) out.push_back(b);
  return out;
}

long GlobalBatchSchedule::iterations_for(long train_samples) const {
  long iterations = 0, consumed = 0;
  // Megatron's loop (consumed += at(consumed) while consumed <= the ramp-up samples), taken a
  // batch size at a time: at() never decreases, so the iterations at one size are the longest
  // run of n for which the n-th still starts within the ramp-up at that size (binary search).
  // Megatron's loop runs the whole ramp-up whatever the training length; a run that ends
  // within it stops here at its last whole batch instead of training the ramp-up out.
  if (ramps())
    while (consumed <= rampup_.samples) {
      const long batch = at(consumed);
      long lo = 1, hi = (rampup_.samples - consumed) / batch + 1;
      while (lo < hi) {
        const long mid = lo + (hi - lo + 1) / 2;
        if (at(consumed + (mid - 1) * batch) == batch)
          lo = mid;
        else
          hi = mid - 1;
      }
      const long fitting = (train_samples - consumed) / batch;  // whole batches left
      if (fitting < lo) return iterations + std::max(0L, fitting);
      consumed += lo * batch, iterations += lo;
    }
  return iterations + std::max(0L, train_samples - consumed) / global_batch_;
}

long GlobalBatchSchedule::samples_after(long iterations) const {
  long consumed = 0, it = 0;
  for (; it < iterations && consumed <= rampup_.samples && ramps(); ++it) consumed += at(consumed);
  return consumed + (iterations - it) * global_batch_;
}

}  // namespace trident
