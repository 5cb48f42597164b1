#pragma once
// Distributed checkpoints. A checkpoint is a directory `iter_NNNNNNN` under --save:
//   manifest.json       format version, model config, parallel layout, iteration, consumed
//                       samples, optimizer steps, every tensor's global shape and shard,
//                       and the size and xxh64 checksum of every file
//   model_tpT_ppP.safetensors   what tensor rank T of pipeline rank P owns: each tensor's
//                       local shard and its two Adam moments (data-parallel rank 0 writes)
// Files are written into `iter_NNNNNNN.tmp`, flushed, the directory is renamed, and the
// `latest` file is replaced last, so a crash at any moment leaves the previous checkpoint.
// Loading rebuilds each tensor in global space from the shards, so a checkpoint saved under
// one (t, p, d) loads under any other. Nothing in a checkpoint is executed.
#include <iosfwd>
#include <stdexcept>
#include <string>

#include "config/training_config.h"
#include "train/rank_model.h"
#include "train/trainer.h"

namespace trident::checkpoint {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
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
// die_before_commit (testing): world rank 0 exits abruptly after every file is written but
// before the directory is renamed, as a crash would.
void save(const std::string& dir, const TrainingConfig& c, RankModel& model,
          const TrainingState& state, const RankContext& rank, std::ostream& log,
          bool die_before_commit = false);

// True when `dir` holds a checkpoint to resume from (its `latest` file exists).
bool has_checkpoint(const std::string& dir);

// Loads `latest` under `dir` into the model (any layout) after validating the manifest and
// every file; throws CheckpointError, naming the file and the problem, before changing
// anything. Collective over the world.
TrainingState load(const std::string& dir, const TrainingConfig& c, RankModel& model,
                   const RankContext& rank, std::ostream& log);

}  // namespace trident::checkpoint
