#pragma once
// A run's state in and out: resuming from --load (or taking its weights, --finetune), the
// checkpoints under --save, and the HuggingFace export (--save-hf). The calls into
// checkpoint/ and gather_rank_model are here alone.
#include <string>
#include <vector>

#include "core/startup_clock.h"
#include "train/training_config.h"

namespace trident::train {

struct TrainingRun;

// The rules of --load and --ckpt-step, checked against the file system before anything is
// built: --load names a checkpoint (its directory, its `latest` file or an iteration
// directory), or is also the --save directory and holds none yet (a job's first start; a
// restarted one resumes). Each broken rule names the path and what was expected.
std::vector<std::string> load_path_errors(const TrainingConfig& c);

// Resuming (neither --finetune nor --override-checkpoint-config): the checkpoint's run
// settings compared with this run's before anything is built, as the load will compare them
// (--override-opt-param-scheduler leaves the LR schedule out). One message listing every
// difference, or none; a damaged manifest is reported as the load would.
std::vector<std::string> resume_errors(const TrainingConfig& c);

// Whether --load names a checkpoint: a restarted job finds none on its first start, and
// begins from the initialisation.
bool has_checkpoint_to_resume(const TrainingConfig& c);

// Loads the checkpoint --load asks for into run.model and sets where the run continues
// (first iteration, consumed samples, evaluations, LR schedule); says so when there is
// nothing to resume yet.
void resume_from_checkpoint(TrainingRun& run, bool resumable, StartupClock& startup);

// Collective over the world: saves the state after `iteration` under --save.
void save_checkpoint(TrainingRun& run, long iteration);

// Collective over the model's ranks: the whole model, written by world rank 0 (--save-hf).
void export_hf_model(TrainingRun& run);

}  // namespace trident::train
