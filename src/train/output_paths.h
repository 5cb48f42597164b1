#pragma once
// Every path a training run writes, checked before anything is built (core/files.h): a run
// that cannot write its checkpoint, export or trace exits 2 in seconds instead of failing
// after its last step with the work lost.
#include "train/training_config.h"

namespace trident::train {

// Throws FormatError naming the first flag whose path cannot be written.
void check_output_paths(const TrainingConfig& c);

}  // namespace trident::train
