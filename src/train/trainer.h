#pragma once
#include <iosfwd>

#include "core/stop_signals.h"
#include "engine/rank_context.h"
#include "train/training_config.h"

namespace trident::train {

// Exit codes of a run that trained nothing it should keep (besides 2, refused input).
constexpr int kExitLossNotFinite = 3;
// fp16: every iteration of the run overflowed and was skipped; the weights are untouched.
constexpr int kExitEveryStepSkipped = 4;

// Runs `trident train` on one rank: builds the model from the validated config, prints
// the layout and memory plan, trains, validates, and writes what was asked for. `log` is
// rank 0's output (other ranks pass a stream that discards). `signals` are the stop signals
// the caller watches (train/early_stop.h). Returns the exit code: 0 also for a run that
// stopped early with its checkpoint; kExitEveryStepSkipped, with no final checkpoint or
// export, when every step of an fp16 run was skipped (Megatron saves and exits 0).
int run_training(const TrainingConfig& config, const engine::RankContext& rank, std::ostream& log,
                 const StopSignals& signals);

}  // namespace trident::train
