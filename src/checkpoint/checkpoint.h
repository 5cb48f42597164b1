#pragma once
// Distributed checkpoints. A checkpoint is a directory `iter_NNNNNNN` under --save:
//   manifest.json       format version, model config, parallel layout, iteration, consumed
//                       samples, optimizer steps, every tensor's global shape and shard,
//                       and the size and xxh64 checksum of every file
//   model_tpT_ppP.safetensors   what tensor rank T of pipeline rank P owns: each tensor's
//                       local shard and its two Adam moments (data-parallel rank 0 writes)
// Files are written into `iter_NNNNNNN.tmp` and fsynced; the commit renames it into place and
// replaces `latest` last, fsyncing the directory after every rename, so a crash at any moment
// leaves a loadable checkpoint. Saving an iteration that already exists (a run resumed at its
// last iteration) first moves the committed one aside to `iter_NNNNNNN.old` and removes it only
// after `latest` is rewritten; a load whose `latest` names a missing directory takes its `.old`.
// The manifest's "run" object holds the settings that shape the run (seed, batch sizes,
// sequence length, data, LR schedule); a resume that changes one is refused unless asked for.
// Loading rebuilds each tensor in global space from the shards, so a checkpoint saved under
// one (t, p, d) loads under any other. Nothing in a checkpoint is executed.
#include <functional>
#include <iosfwd>
#include <stdexcept>
#include <string>

#include "checkpoint/manifest.h"
#include "train/training_config.h"
#include "engine/rank_context.h"
#include "engine/rank_model.h"

namespace trident::checkpoint {

// Testing: where world rank 0 exits abruptly inside a save, as a crash would.
enum class SaveFault {
  kNone,
  kBeforeCommit,  // every file written, nothing renamed
  kMidCommit,     // the iteration's committed directory moved aside, the new one not yet in place
};

// What a load takes from a checkpoint.
enum class LoadMode {
  kResume,          // everything; the run settings must equal this run's (exit 2 otherwise)
  kResumeOverride,  // everything; differing run settings are printed as warnings
  kWeightsOnly,     // --finetune, convert: the weights; iteration, optimizer and scaler afresh
};

struct TrainingState {
  long iteration = 0;
  long consumed_samples = 0;
  long evaluations = 0;
  // Samples the learning-rate schedule has advanced: consumed samples less those of skipped
  // (fp16 overflow) iterations, as Megatron's scheduler counts them.
  long lr_schedule_samples = 0;
};

// Collective over the world: every rank calls it.
void save(const std::string& dir, const TrainingConfig& c, RankModel& model,
          const TrainingState& state, const RankContext& rank, std::ostream& log,
          SaveFault fault = SaveFault::kNone);

// True when `dir` holds a checkpoint to resume from (its `latest` file exists).
bool has_checkpoint(const std::string& dir);

// The directory of the checkpoint `latest` under `dir` names (its `.old` copy when a save of
// the same iteration was interrupted mid-commit); throws CheckpointError when there is none.
std::string latest_checkpoint(const std::string& dir);

// Loads `latest` under `dir` into the model (any layout) after validating the manifest, the
// run settings (kResume) and every file; throws CheckpointError, naming the file and the
// problem, before changing anything. Collective over the world.
// progress (optional) is told the fraction of this rank's tensors in place.
TrainingState load(const std::string& dir, const TrainingConfig& c, RankModel& model,
                   const RankContext& rank, std::ostream& log, LoadMode mode,
                   const std::function<void(double)>& progress = {});

}  // namespace trident::checkpoint
