#pragma once
#include <iosfwd>

#include "config/training_config.h"

namespace trident {

// Runs `trident train` on one rank: builds the model from the validated config, prints
// the layout and memory plan, trains, validates, and writes what was asked for.
int run_training(const TrainingConfig& config, std::ostream& log);

// Peak resident set size of this process so far, in bytes.
long peak_rss_bytes();

}  // namespace trident
