#pragma once
// What a training run's checkpoints record of it: its layout and seed, and the settings that
// shape it (seed, batch sizes, sequence length, data, LR schedule), each with the flag that
// sets it, for the checkpoint to compare on resume.
#include "checkpoint/checkpoint.h"
#include "train/training_config.h"

namespace trident::train {

checkpoint::RunRecord run_record(const TrainingConfig& c);

}  // namespace trident::train
