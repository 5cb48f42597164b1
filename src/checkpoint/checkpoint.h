#pragma once
// Distributed checkpoints. A checkpoint is a directory `iter_NNNNNNN` under --save:
//   manifest.json       format version, model config, parallel layout, iteration, consumed
//                       samples, optimizer steps, every tensor's global shape and shard,
//                       and the size and xxh64 checksum of every file
//   model_tpT_ppP.safetensors   what tensor rank T of pipeline rank P owns: each tensor's
//                       local shard and its two Adam moments (data-parallel rank 0 writes it;
//                       with a sharded optimizer every data-parallel rank writes its shard of
//                       it in place, the same bytes: checkpoint/sharded_write.h; under expert
//                       parallelism likewise, each expert from the ranks holding it, the file
//                       listing every expert inline as at EP = 1)
//   tokenizer/          the run's tokenizer files, when it had one (checkpoint/tokenizer_files.h)
// How saves are committed crash-safely: checkpoint/lifecycle.h. The manifest's "run" object
// holds the settings that shape the run; a resume that changes one is refused unless asked
// for (checkpoint/run_settings.h). Loading rebuilds each tensor in global space from the
// shards, so a checkpoint saved under one (t, p, d) loads under any other. Nothing in a
// checkpoint is executed.
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/lifecycle.h"
#include "checkpoint/manifest.h"
#include "checkpoint/run_settings.h"
#include "checkpoint/tokenizer_files.h"
#include "engine/rank_context.h"
#include "engine/rank_layout.h"
#include "engine/rank_model.h"

namespace trident::checkpoint {

// What a checkpoint records of the run besides the tensors, and what a load compares.
struct RunRecord {
  engine::RankLayout layout;  // the model, t, p, d, v, precision, dropout, distributed optimizer
  std::uint64_t seed = 0;
  // The settings that shape the run (train/run_record.cpp); empty: none recorded (convert
  // writes checkpoints of no run).
  std::vector<RunSetting> settings;
  // Checkpoints from before sample-based schedules: the LR schedule's position is rebuilt
  // from consumed samples at this global batch.
  long global_batch = 0;
  // The tokenizer's files, copied into the checkpoint (empty: the run had none).
  TokenizerRecord tokenizer;
};

struct TrainingState {
  long iteration = 0;
  long consumed_samples = 0;
  long evaluations = 0;
  // Samples the learning-rate schedule has advanced: consumed samples less those of skipped
  // (fp16 overflow) iterations, as Megatron's scheduler counts them.
  long lr_schedule_samples = 0;
};

// A checkpoint that could not be written (not bad input: the run fails with exit code 1).
struct SaveError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct SaveOptions {
  int keep_checkpoints = 0;  // 0: keep all
  SaveFault fault = SaveFault::kNone;
};

// Collective over the world: every rank calls it. Asynchronous saves: checkpoint/async_save.h.
void save(const std::string& dir, const RunRecord& run, engine::RankModel& model,
          const TrainingState& state, const engine::RankContext& rank, std::ostream& log,
          const SaveOptions& options = {});

// Loads `latest` under `dir` into the model (any layout) after validating the manifest, the
// run settings (kResume) and every file; throws CheckpointError, naming the file and the
// problem, before changing anything. Collective over the world. With a sharded optimizer each
// rank places its shard of the weights and moments, and the weights are all-gathered over
// data parallelism (GradientReducer::all_gather_values).
// progress (optional) is told the fraction of this rank's tensors in place.
TrainingState load(const std::string& dir, const RunRecord& run, engine::RankModel& model,
                   const engine::RankContext& rank, std::ostream& log, LoadMode mode,
                   const std::function<void(double)>& progress = {});

}  // namespace trident::checkpoint
