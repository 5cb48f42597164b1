#pragma once
// One rank's share of a checkpoint, taken from the model when it is saved: the tensors its
// file holds (or, with a sharded optimizer, its pieces of them) and, on world rank 0, the
// manifest. checkpoint::save writes it at once; an AsyncSaver (checkpoint/async_save.h) hands
// it to a background thread. Taking it is the only collective part of a save (the directory
// set-up); writing and committing it touch neither the model nor a communicator.
#include <cstdint>
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

// Floats of this rank's optimizer shard (in the model or the snapshot's copy) that go to byte
// `offset` of the file: part of one tensor's values or of one of its moments.
struct FilePiece {
  const float* data;
  long floats;
  std::uint64_t offset;
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
  // A sharded optimizer (checkpoint/sharded_write.h): every data-parallel rank writes the
  // pieces of `file` in its shard of the values and moments, in place; data-parallel rank 0
  // (`writes`) also the header, and, once every rank's pieces are durable, the side-car.
  // `tensors` then only give the header (their data is not read).
  bool sharded = false;
  int data_rank = 0, data_size = 1;
  std::string header;
  std::uint64_t file_bytes = 0;
  std::vector<FilePiece> pieces;
  // Asynchronous: the other ranks' pieces are known durable by their marker files.
  bool markers = false;
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();  // their manifest entries
  // World rank 0 commits: the manifest (its "files" filled from the side-cars), the tokenizer.
  bool commits = false;
  nlohmann::ordered_json manifest;
  TokenizerRecord tokenizer;
  std::vector<std::string> side_cars;  // of every rank's file, which the commit waits for
};

// Allocates and first-touches (huge pages asked for) the buffers this rank's snapshots with
// copy_model copy into (3 x its optimizer shard per chunk when sharded; else 3 x the buffer on
// data-parallel rank 0, nothing on the others), so that the first asynchronous save blocks the step
// for the copy only. Not collective.
void reserve_snapshot_buffers(engine::RankModel& model, const engine::RankContext& rank,
                              SnapshotBuffers& buffers);

// Collective over the world. World rank 0 tidies interrupted saves and makes `tmp`. With
// copy_model what the rank writes (the whole file on data-parallel rank 0 when the optimizer
// is not sharded; its shard of the values and moments when it is) points into `buffers`, to be
// filled by copy_into_snapshot, after which the model may change; without, it points into the
// model until written.
SaveSnapshot take_snapshot(const std::string& dir, const RunRecord& run, engine::RankModel& model,
                           const TrainingState& state, const engine::RankContext& rank,
                           const SaveOptions& options, SnapshotBuffers& buffers, bool copy_model);

// Makes the snapshot's copies of the weights and moments. Reads the model: until it returns,
// nothing may change them (an optimizer step).
void copy_into_snapshot(const SaveSnapshot& s);

// Testing (SaveFault): what goes wrong once the file's first bytes are out.
void inject_write_fault(SaveFault fault);

// The side-car of the rank's file, written atomically beside it in `tmp`: its size, xxh64 and
// tensor entries. Written only once the file is durable under its name.
void write_side_car(const SaveSnapshot& s, std::uint64_t bytes, std::uint64_t xxh64);

// The rank's file, streamed out and fsynced, then its side-car (size, xxh64, tensor
// entries) written atomically beside it: a side-car in `tmp` means its file is durable.
void write_rank_file(const SaveSnapshot& s);

// World rank 0: waits until every side-car is in `tmp` (asking keep_waiting between looks;
// false: throws SaveError, nothing committed), folds them into the manifest, writes it and
// the tokenizer files, and commits (checkpoint/lifecycle.h). Returns the checkpoint's bytes.
double commit_snapshot(const SaveSnapshot& s, const std::function<bool()>& keep_waiting);

}  // namespace trident::checkpoint
