#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "train/training_config.h"
#include "engine/rank_context.h"

namespace trident {

// Runs `trident train` on one rank: builds the model from the validated config, prints
// the layout and memory plan, trains, validates, and writes what was asked for. `log` is
// rank 0's output (other ranks pass a stream that discards).
int run_training(const TrainingConfig& config, const RankContext& rank, std::ostream& log);

// Peak resident set size of this process so far, in bytes.
long peak_rss_bytes();

}  // namespace trident
