#include "checkpoint/lifecycle.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "checkpoint/manifest.h"
#include "core/files.h"

namespace trident::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kAsideSuffix = ".old";

// `iter_` and digits only: a committed checkpoint (not .tmp or .old), and nothing that could
// lead `latest` outside the checkpoint directory.
bool is_iteration_name(const std::string& name) {
  if (name.size() <= 5 || name.compare(0, 5, "iter_") != 0) return false;
  return std::all_of(name.begin() + 5, name.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

}  // namespace

std::string iteration_dir(long it) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "iter_%07ld", it);
  return buf;
}

// What interrupted saves leave: `iter_N.tmp` (never committed) is removed; `iter_N.old` (a
// commit interrupted after moving `iter_N` aside) is renamed back when `iter_N` is missing
// (`latest` may name it; a rename keeps it loadable throughout) and removed when `iter_N`
// exists (then `iter_N` is complete and the copy stale). World rank 0 only, before a save.
void tidy_interrupted_saves(const fs::path& dir) {
  if (!fs::is_directory(dir)) return;
  std::vector<fs::path> unfinished, aside;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!is_iteration_name(e.path().stem().string())) continue;
    if (e.path().extension() == ".tmp") unfinished.push_back(e.path());
    if (e.path().extension() == kAsideSuffix) aside.push_back(e.path());
  }
  for (const fs::path& tmp : unfinished) fs::remove_all(tmp);
  for (const fs::path& old : aside) {
    const fs::path committed = old.parent_path() / old.stem();
    if (fs::exists(committed))
      fs::remove_all(old);
    else
      rename_durably(old.string(), committed.string());
  }
}

// Puts the fully written `tmp` in place as `name` and points `latest` at it, never removing
// the directory `latest` names before its replacement is committed: an existing `name` (a
// run resumed at its last iteration saves that iteration again) is moved aside, and removed
// only once `latest` is rewritten. World rank 0 only.
void commit(const fs::path& dir, const fs::path& tmp, const std::string& name, SaveFault fault) {
  const fs::path final_dir = dir / name, aside = dir / (name + kAsideSuffix);
  if (fs::exists(final_dir)) {
    fs::remove_all(aside);  // stale: `name` itself is complete
    rename_durably(final_dir.string(), aside.string());
  }
  if (fault == SaveFault::kMidCommit) std::_Exit(9);
  rename_durably(tmp.string(), final_dir.string());
  write_file_atomically((dir / "latest").string(), name + "\n");
  fs::remove_all(aside);
  fsync_directory(dir.string());
}

// Keeps the newest `keep` committed checkpoints. World rank 0 only, after a commit.
void remove_old_checkpoints(const fs::path& dir, int keep) {
  std::vector<fs::path> committed;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && is_iteration_name(e.path().filename().string()))
      committed.push_back(e.path());
  std::sort(committed.begin(), committed.end());
  for (size_t k = 0; k + keep < committed.size(); ++k) fs::remove_all(committed[k]);
}

bool has_checkpoint(const std::string& dir) {
  return fs::exists(fs::path(dir) / "latest");
}

std::string latest_checkpoint(const std::string& dir) {
  const fs::path latest = fs::path(dir) / "latest";
  std::ifstream in(latest);
  std::string name;
  if (!in || !std::getline(in, name))
    throw CheckpointError(latest.string() + ": missing (is " + dir + " a checkpoint directory?)");
  if (!is_iteration_name(name))
    throw CheckpointError(latest.string() + ": names '" + name +
                          "', expected a directory name iter_NNNNNNN");
  const fs::path committed = fs::path(dir) / name, aside = fs::path(dir) / (name + kAsideSuffix);
  if (!fs::exists(committed) && fs::is_directory(aside)) return aside.string();
  return committed.string();
}

bool is_aside(const fs::path& checkpoint_dir) {
  return checkpoint_dir.extension() == kAsideSuffix;
}

}  // namespace trident::checkpoint
