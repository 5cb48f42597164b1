#pragma once
// Samples while training (--sample-interval N --sample-prompt TEXT): every N iterations the
// model, gathered to world rank 0, continues the prompt, so a run shows what it has learnt
// as it goes, not only its loss. Rank 0 builds a one-process generation model from the
// gathered weights (a second copy of the model, on rank 0 only) and prints one line.
#include "train/training_run.h"

namespace trident::train {

// Collective over every rank (the gather); prints on world rank 0.
void print_sample(TrainingRun& run, long iteration);

}  // namespace trident::train
