#pragma once
// A checkpoint directory's life: `iter_NNNNNNN` directories under --save, `latest` naming the
// newest, saves written into `iter_NNNNNNN.tmp` and committed by renames, a committed
// iteration being replaced moved aside to `.old` until `latest` is rewritten, old ones
// removed past --keep-checkpoints. Every rename is followed by an fsync of the directory,
// so a crash at any moment leaves a loadable checkpoint.
#include <filesystem>
#include <string>

namespace trident::checkpoint {

// Testing: where world rank 0 exits abruptly inside a save, as a crash would; or where a
// rank's writing goes wrong without the process dying.
enum class SaveFault {
  kNone,
  kBeforeCommit,  // every file written, nothing renamed
  kMidCommit,     // the iteration's committed directory moved aside, the new one not yet in place
  kStallWriting,  // the rank's file stops after its header, for good (to be killed)
  kWriteError,    // writing the rank's file fails (as a full disk would)
};

// "iter_0000042".
std::string iteration_dir(long iteration);

// What interrupted saves leave is cleaned up: `iter_N.tmp` removed; `iter_N.old` renamed
// back when `iter_N` is missing, removed when it exists. World rank 0 only, before a save.
void tidy_interrupted_saves(const std::filesystem::path& dir);

// Puts the fully written `tmp` in place as `name` and points `latest` at it. World rank 0.
void commit(const std::filesystem::path& dir, const std::filesystem::path& tmp,
            const std::string& name, SaveFault fault);

// Keeps the newest `keep` committed checkpoints. World rank 0 only, after a commit.
void remove_old_checkpoints(const std::filesystem::path& dir, int keep);

// What a --load path names. A checkpoint is named by its directory (the one --save wrote,
// holding `latest`), by that `latest` file, or by one committed `iter_NNNNNNN` directory
// (holding manifest.json).
enum class LoadPathKind {
  kCheckpointDir,  // a directory holding `latest`
  // A directory without `latest` holding complete iter_NNNNNNN directories (the first save
  // died between its rename and `latest`, or `latest` was removed): its newest is loaded.
  kCheckpointDirWithoutLatest,
  kLatestFile,    // a file named `latest`
  kIterationDir,  // iter_NNNNNNN with manifest.json (or its `.old` copy of an interrupted commit)
  kMissing,       // nothing there
  kNoCheckpoint,  // a directory without `latest` or iter_NNNNNNN directories (`.tmp` aside)
  // iter_NNNNNNN directories, none with manifest.json: damage, never taken for "no checkpoint
  // yet" (a restart would train from the initialisation and overwrite them).
  kIncompleteCheckpointDir,
  kIncompleteIteration,  // an iter_NNNNNNN directory without manifest.json
  kOtherFile,            // a file other than `latest`
};
LoadPathKind classify_load_path(const std::string& path);

// What classify_load_path's answer means, for messages ("a directory without `latest`").
std::string describe(LoadPathKind kind);
// What a --load path may name, for messages.
std::string expected_load_path();

// True when `path` names a checkpoint to load (the first four kinds above).
bool has_checkpoint(const std::string& path);

// The iteration directory `path` names: for a checkpoint directory or its `latest`, the one
// `latest` names (its `.old` copy when a save of the same iteration was interrupted
// mid-commit), or without `latest` the newest complete one; for an iteration directory, itself.
// Throws CheckpointError when there is none.
std::string latest_checkpoint(const std::string& path);

// The checkpoint directory `path` belongs to: itself, or the parent of `latest` or of an
// iteration directory.
std::string checkpoint_root(const std::string& path);

// `iter_NNNNNNN` of `step` under the checkpoint directory `dir` (Megatron's --ckpt-step);
// throws CheckpointError naming the iterations `dir` holds when it has no such one.
std::string iteration_checkpoint(const std::string& dir, long step);

// Whether a directory latest_checkpoint returned is the `.old` copy of an interrupted commit.
bool is_aside(const std::filesystem::path& checkpoint_dir);

}  // namespace trident::checkpoint
