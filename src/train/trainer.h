#pragma once
#include <iosfwd>

#include "core/stop_signals.h"
#include "engine/rank_context.h"
#include "train/training_config.h"

namespace trident::train {

// Runs `trident train` on one rank: builds the model from the validated config, prints
// the layout and memory plan, trains, validates, and writes what was asked for. `log` is
// rank 0's output (other ranks pass a stream that discards). `signals` are the stop signals
// the caller watches (train/early_stop.h). Returns the exit code: 0 also for a run that
// stopped early with its checkpoint.
int run_training(const TrainingConfig& config, const engine::RankContext& rank, std::ostream& log,
                 const StopSignals& signals);

}  // namespace trident::train
