#pragma once
// Whether a run stops before train_iters (Megatron's exit conditions): a stop signal reached
// any rank (--exit-signal-handler), the next iteration would end past
// --exit-duration-in-mins, or the iteration is a multiple of --exit-interval. Every rank
// takes the same decision after the same iteration: the signal and the time budget, which
// one rank alone may see, are agreed by one all-reduce of two numbers per iteration (only
// when one of them is enabled), so no rank waits in a collective that another has left.
#include <chrono>
#include <string>

#include "core/stop_signals.h"
#include "train/training_config.h"

namespace trident::engine {
struct RankContext;
}

namespace trident::train {

class EarlyStop {
 public:
  using Clock = std::chrono::steady_clock;
  EarlyStop(const TrainingConfig& c, const StopSignals& signals, Clock::time_point started);

  // Collective over the world when signals or the time budget are watched. After iteration
  // `iteration`, whose step took `step_seconds`: why the run stops now ("" to carry on).
  std::string after_iteration(long iteration, double step_seconds,
                              const engine::RankContext& rank) const;

 private:
  // This rank's view: {the stop signal received (0: none), 1 if the budget ends here}.
  void local_view(double step_seconds, double view[2]) const;

  const TrainingConfig& config_;
  const StopSignals& signals_;
  Clock::time_point started_;
};

}  // namespace trident::train
