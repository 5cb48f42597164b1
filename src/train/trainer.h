#pragma once
#include <iosfwd>

#include "engine/rank_context.h"
#include "train/training_config.h"

namespace trident::train {

// Runs `trident train` on one rank: builds the model from the validated config, prints
// the layout and memory plan, trains, validates, and writes what was asked for. `log` is
// rank 0's output (other ranks pass a stream that discards). Returns the exit code.
int run_training(const TrainingConfig& config, const engine::RankContext& rank, std::ostream& log);

}  // namespace trident::train
