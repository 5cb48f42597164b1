#pragma once
// A checkpoint directory's life: `iter_NNNNNNN` directories under --save, `latest` naming the
// newest, saves written into `iter_NNNNNNN.tmp` and committed by renames, a committed
// iteration being replaced moved aside to `.old` until `latest` is rewritten, old ones
// removed past --keep-checkpoints. Every rename is followed by an fsync of the directory,
// so a crash at any moment leaves a loadable checkpoint.
#include <filesystem>
#include <string>

namespace trident::checkpoint {

// Testing: where world rank 0 exits abruptly inside a save, as a crash would.
enum class SaveFault {
  kNone,
  kBeforeCommit,  // every file written, nothing renamed
  kMidCommit,     // the iteration's committed directory moved aside, the new one not yet in place
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

// True when `dir` holds a checkpoint to resume from (its `latest` file exists).
bool has_checkpoint(const std::string& dir);

// The directory of the checkpoint `latest` under `dir` names (its `.old` copy when a save of
// the same iteration was interrupted mid-commit); throws CheckpointError when there is none.
std::string latest_checkpoint(const std::string& dir);

// Whether a directory latest_checkpoint returned is the `.old` copy of an interrupted commit.
bool is_aside(const std::filesystem::path& checkpoint_dir);

}  // namespace trident::checkpoint
