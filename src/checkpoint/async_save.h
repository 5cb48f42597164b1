#pragma once
// Asynchronous checkpoints (--async-save, Megatron's flag). A save takes a snapshot of the
// rank's share (sharded moments gathered; the manifest with the iteration, data position,
// loss scaler and optimizer steps built) and returns; a thread per rank copies the weights
// and Adam moments into the snapshot and writes it with the synchronous save's atomic
// protocol. The copy overlaps the next iteration's forward and backward, which read the
// weights but change neither them nor the moments: the trainer calls wait_until_copied()
// before the next optimizer step (it waits only if forward and backward were shorter).
//
// With a sharded optimizer every data-parallel rank's writer writes its pieces of the file in
// place, and data-parallel rank 0's, once their markers say all pieces are durable, finishes
// the file: checksum, side-car (checkpoint/sharded_write.h). The snapshot then holds the
// rank's shard of the weights and moments only.
//
// How the commit knows every rank's files are durable without a communicator. Collectives
// from two threads on one communicator would interleave, so every collective of a save runs
// on the training thread, while the snapshot is taken or while finish() waits; the writers
// use files only. Each writing rank writes its safetensors file (fsynced, renamed, directory
// fsynced), then its side-car json atomically: a side-car in iter_N.tmp means its file is
// durable. World rank 0's writer, after its own file, waits for every (t, p)'s side-car to
// appear, writes the manifest and commits (rename to iter_N, then `latest`). A rank whose
// write failed never writes its side-car, so nothing is committed; finish() — called by the
// next save and at the end of the run — first waits for this rank's own file, then all
// ranks agree (all-reduce) whether every file (sharded: every rank's pieces) was written: if
// not, the writers waiting for others are told to stop and every rank throws SaveError; if
// so, each data-parallel rank 0 finishes its file, and a second all-reduce says whether all
// did (the same way out if not); then rank 0's commit will complete, and a third all-reduce
// says whether it did.
#include <atomic>
#include <condition_variable>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "checkpoint/save_snapshot.h"

namespace trident::checkpoint {

class AsyncSaver {
 public:
  AsyncSaver() = default;
  AsyncSaver(const AsyncSaver&) = delete;
  AsyncSaver& operator=(const AsyncSaver&) = delete;
  // Waits for the write in flight; never throws. Unwinding from an exception, it lets rank
  // 0's writer give up waiting for other ranks (the previous checkpoint stays `latest`).
  ~AsyncSaver();

  // Allocates the snapshot's buffers now (at start-up) rather than in the first save.
  void reserve(engine::RankModel& model, const engine::RankContext& rank) {
    reserve_snapshot_buffers(model, rank, buffers_);
  }

  // Collective over the world: finishes the previous save (finish()), takes the snapshot
  // and starts writing it. Logs how long the caller was blocked.
  void save(const std::string& dir, const RunRecord& run, engine::RankModel& model,
            const TrainingState& state, const engine::RankContext& rank, std::ostream& log,
            const SaveOptions& options = {});

  // Returns once the save in flight (if any) no longer reads the model; called before
  // anything changes the weights or moments. Training thread only.
  void wait_until_copied();

  // Collective over the world: waits for the save in flight (none: returns), logs how long
  // its write took, and throws SaveError on every rank when any rank's write or the commit
  // failed.
  void finish(const engine::RankContext& rank, std::ostream& log);

  // The snapshot's buffers, allocated by the first save and reused.
  long snapshot_bytes() const { return buffers_.bytes(); }

 private:
  void write();  // the background thread
  bool wait_for_own_file();
  bool wait_for_finished_file();
  // Collective: every rank says whether its step went well; if any did not, the writer is
  // stopped and SaveError thrown on every rank, naming the failing ranks and `what` failed.
  void agree_on_failure(comm::Communicator& world, bool ok, const std::string& error,
                        const std::string& what);
  void stop_thread();

  SnapshotBuffers buffers_;
  std::unique_ptr<SaveSnapshot> snapshot_;
  std::thread writer_;
  std::mutex mutex_;
  std::condition_variable file_written_;  // and copied_
  bool copied_ = false;                   // the snapshot holds its copies of the model
  bool file_done_ = false;                // this rank's file (and side-car) written, or failed
  std::string file_error_;                // why this rank's file failed ("": it did not)
  bool file_finished_ = false;            // sharded: data-parallel rank 0 finished the file
  std::string finish_error_;              // why finishing it failed
  std::string commit_error_;              // world rank 0: why the commit failed
  std::atomic<bool> give_up_{false};      // rank 0's writer stops waiting for side-cars
  double blocked_seconds_ = 0, write_seconds_ = 0, bytes_ = 0;
};

}  // namespace trident::checkpoint
