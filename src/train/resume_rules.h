#pragma once
// What --load, --ckpt-step and a resume may be, checked against the file system and the
// checkpoint's manifest while the flags are validated, before anything is built (a parser-
// level rule: the load itself is train/checkpointing.h's).
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "train/training_config.h"

namespace trident::train {

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

// A --save directory that holds a checkpoint is resumed from when --load is not given
// (Megatron users script `--load $SAVE --save $SAVE`; a requeued job's restart needs nothing
// else), and also with --finetune: the fine-tuning run restarts from its own checkpoint, not
// from the weights it began with. --load becomes --save, load_defaulted_to_save says so.
void default_load_to_save(TrainingConfig& c);

// Whether --load names a checkpoint: a restarted job finds none on its first start, and
// begins from the initialisation.
bool has_checkpoint_to_resume(const TrainingConfig& c);

// How this run's learning-rate schedule differs from the checkpoint's, one line each.
std::vector<std::string> lr_schedule_changes(const TrainingConfig& c,
                                             const nlohmann::ordered_json& manifest);

// What checkpoint::load is given: --load, or iteration --ckpt-step under its directory.
std::string checkpoint_to_load(const TrainingConfig& c);

// --override-opt-param-scheduler: the load compares everything but the schedule.
void leave_out_lr_schedule(const TrainingConfig& c, checkpoint::RunRecord& record);

}  // namespace trident::train
