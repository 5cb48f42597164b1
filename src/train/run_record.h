#pragma once
// What a training run's checkpoints record of it: its layout and seed, and the settings that
// shape it (seed, batch sizes, sequence length, data, LR schedule), each with the flag that
// sets it, for the checkpoint to compare on resume.
#include "checkpoint/checkpoint.h"
#include "train/training_config.h"

namespace trident::train {

checkpoint::RunRecord run_record(const TrainingConfig& c);

// The settings of run_record that make up the learning-rate schedule: peak, floor, style,
// and the warm-up and decay lengths in samples as the run uses them (not the flags, whose
// 0 means "the training length"). --override-opt-param-scheduler resumes with these changed.
std::vector<checkpoint::RunSetting> lr_schedule_settings(const TrainingConfig& c);

}  // namespace trident::train
