#pragma once
// A run's state in and out: resuming from --load (or taking its weights, --finetune), the
// checkpoints under --save, and the HuggingFace export (--save-hf). The calls into
// checkpoint/ and gather_rank_model are here alone.
#include <string>
#include <vector>

#include "core/startup_clock.h"
#include "train/resume_rules.h"
#include "train/training_config.h"

namespace trident::train {

struct TrainingRun;

// Loads the checkpoint --load asks for into run.model and sets where the run continues
// (first iteration, consumed samples, evaluations, LR schedule); says so when there is
// nothing to resume yet.
void resume_from_checkpoint(TrainingRun& run, bool resumable, StartupClock& startup);

// Collective over the world: saves the state after `iteration` under --save; with
// --async-save, takes its snapshot and returns while a background thread writes it.
void save_checkpoint(TrainingRun& run, long iteration);

// Collective over the world: waits for the asynchronous save in flight, if any; throws
// checkpoint::SaveError on every rank when any rank's write failed (the run fails).
void finish_checkpoint_saves(TrainingRun& run);

// Collective over the model's ranks: the whole model, written by world rank 0 (--save-hf).
void export_hf_model(TrainingRun& run);

}  // namespace trident::train
