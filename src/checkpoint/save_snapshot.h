#pragma once
// One rank's share of a checkpoint, taken from the model when it is saved: the tensors its
// file holds and, on world rank 0, the manifest. checkpoint::save writes it at once; an
// AsyncSaver (checkpoint/async_save.h) hands it to a background thread. Taking it is the only
// collective part of a save (the directory set-up and the gathering of sharded moments);
// writing and committing it touch neither the model nor a communicator.
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "core/first_touch.h"
#include "io/safetensors.h"

namespace trident::checkpoint {

// The floats a snapshot copies into, kept from one save to the next so that a save after
// the first allocates nothing.
struct SnapshotBuffers {
  std::vector<FirstTouchVector<float>> floats;
  long bytes() const;
};

// Weights or moments of the model that the snapshot holds a copy of, once copied.
struct SnapshotCopy {
  const float* from;
  float* to;
  long floats;
};

struct SaveSnapshot {
  std::filesystem::path dir, tmp;  // --save and iter_NNNNNNN.tmp under it
  std::string name;                // iter_NNNNNNN
  SaveOptions options;
  // Data-parallel rank 0 of each (tensor, pipeline) position writes `file`.
  bool writes = false;
  std::string file;  // model_tpT_ppP.safetensors
  std::vector<io::TensorToWrite> tensors;
  std::vector<SnapshotCopy> copies;  // to make (copy_into_snapshot) before the tensors are read
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();  // their manifest entries
  // World rank 0 commits: the manifest (its "files" filled from the side-cars), the tokenizer.
  bool commits = false;
  nlohmann::ordered_json manifest;
  TokenizerRecord tokenizer;
  std::vector<std::string> side_cars;  // of every rank's file, which the commit waits for
};

// Allocates and first-touches (huge pages asked for) the buffers this rank's snapshots with
// copy_model copy into, so that the first asynchronous save blocks the step for the copy only.
// Not collective.
void reserve_snapshot_buffers(engine::RankModel& model, const engine::RankContext& rank,
                              SnapshotBuffers& buffers);

// Collective over the world. World rank 0 tidies interrupted saves and makes `tmp`; every
// rank takes part in gathering sharded Adam moments (into `buffers`). With copy_model the
// tensors of the weights and unsharded moments point into `buffers`, to be filled by
// copy_into_snapshot, after which the model may change; without, they point into the model
// until written.
SaveSnapshot take_snapshot(const std::string& dir, const RunRecord& run, engine::RankModel& model,
                           const TrainingState& state, const engine::RankContext& rank,
                           const SaveOptions& options, SnapshotBuffers& buffers, bool copy_model);

// Makes the snapshot's copies of the weights and moments. Reads the model: until it returns,
// nothing may change them (an optimizer step).
void copy_into_snapshot(const SaveSnapshot& s);

// The rank's file, streamed out and fsynced, then its side-car (size, xxh64, tensor
// entries) written atomically beside it: a side-car in `tmp` means its file is durable.
void write_rank_file(const SaveSnapshot& s);

// World rank 0: waits until every side-car is in `tmp` (asking keep_waiting between looks;
// false: throws SaveError, nothing committed), folds them into the manifest, writes it and
// the tokenizer files, and commits (checkpoint/lifecycle.h). Returns the checkpoint's bytes.
double commit_snapshot(const SaveSnapshot& s, const std::function<bool()>& keep_waiting);

}  // namespace trident::checkpoint
