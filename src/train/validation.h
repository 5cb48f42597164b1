#pragma once
// The held-out losses of a run: the validation loss every --eval-interval iterations and at
// the end (each time on the next --eval-iters global batches of the validation split), and
// the test loss at the end. What they send over the groups is kept apart from training's.
#include "train/training_run.h"

namespace trident::train {

// Collective over the world; logged by rank 0. Nothing when --eval-iters is 0 or there is
// no validation split.
void run_validation(TrainingRun& run, long iteration);

// Collective over the world; the test loss printed by rank 0 (same conditions) and returned
// (NaN when there was none). A validation or test that runs past 2 s prints its progress.
double run_test(TrainingRun& run);

}  // namespace trident::train
