#include "train/early_stop.h"

#include <cstdio>

#include "engine/rank_context.h"

namespace trident::train {

EarlyStop::EarlyStop(const TrainingConfig& c, const StopSignals& signals, Clock::time_point started)
    : config_(c), signals_(signals), started_(started) {}

void EarlyStop::local_view(double step_seconds, double view[2]) const {
  view[0] = signals_.received();
  view[1] = 0;
  if (config_.exit_duration_in_mins > 0) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
    // The next iteration is taken to last as long as this one.
    view[1] = elapsed + step_seconds > config_.exit_duration_in_mins * 60 ? 1 : 0;
  }
}

std::string EarlyStop::after_iteration(long iteration, double step_seconds,
                                       const engine::RankContext& rank) const {
  if (signals_.enabled() || config_.exit_duration_in_mins > 0) {
    double view[2];
    local_view(step_seconds, view);
    rank.groups->world->all_reduce(view, 2, comm::ReduceOp::kMax);
    if (view[0] > 0) return signal_name((int)view[0]) + " received";
    if (view[1] > 0) {
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "the next iteration would end past --exit-duration-in-mins %g (a step "
                    "takes %.1f s)",
                    config_.exit_duration_in_mins, step_seconds);
      return buf;
    }
  }
  if (config_.exit_interval > 0 && iteration % config_.exit_interval == 0)
    return "--exit-interval " + std::to_string(config_.exit_interval);
  return "";
}

}  // namespace trident::train
