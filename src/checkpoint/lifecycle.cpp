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

namespace {

constexpr const char* kLoadable =
    "expected a checkpoint directory (holding `latest`), its `latest` file or an iter_NNNNNNN "
    "directory";

// "ckpt/" names ckpt: its filename is the last component.
fs::path without_trailing_slash(const std::string& path) {
  fs::path p(path);
  return p.has_filename() || !p.has_parent_path() ? p : p.parent_path();
}

fs::path aside_of(const fs::path& iteration) {
  return iteration.string() + kAsideSuffix;
}

bool has_manifest(const fs::path& dir) {
  return fs::is_regular_file(dir / "manifest.json");
}

// The iteration directory `latest` names under `dir`.
std::string named_by_latest(const fs::path& dir, const fs::path& latest) {
  std::ifstream in(latest);
  std::string name;
  if (!in || !std::getline(in, name))
    throw CheckpointError(latest.string() + ": unreadable or empty (" + kLoadable + ")");
  if (!is_iteration_name(name))
    throw CheckpointError(latest.string() + ": names '" + name +
                          "', expected a directory name iter_NNNNNNN");
  const fs::path committed = dir / name, aside = aside_of(committed);
  if (!fs::exists(committed) && fs::is_directory(aside)) return aside.string();
  return committed.string();
}

// The committed iteration directories under `dir` (`.tmp` and `.old` left out), oldest first.
std::vector<fs::path> iteration_dirs(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && is_iteration_name(e.path().filename().string()))
      out.push_back(e.path());
  std::sort(out.begin(), out.end());  // iter_NNNNNNN: zero-padded, so names sort by iteration
  return out;
}

// The committed iteration directories under `dir`, oldest first, for messages.
std::string iterations_under(const fs::path& dir) {
  const std::vector<fs::path> iterations = iteration_dirs(dir);
  if (iterations.empty()) return "it holds no iteration directory";
  std::string out = "it holds";
  for (const fs::path& it : iterations)
    out += (&it == &iterations.front() ? " " : ", ") + it.filename().string();
  return out;
}

// What a directory without `latest` holds: complete iterations, only incomplete ones, or none.
LoadPathKind classify_without_latest(const fs::path& dir) {
  const std::vector<fs::path> iterations = iteration_dirs(dir);
  if (iterations.empty()) return LoadPathKind::kNoCheckpoint;
  for (const fs::path& it : iterations)
    if (has_manifest(it)) return LoadPathKind::kCheckpointDirWithoutLatest;
  return LoadPathKind::kIncompleteCheckpointDir;
}

std::string newest_complete_iteration(const fs::path& dir) {
  const std::vector<fs::path> iterations = iteration_dirs(dir);
  for (auto it = iterations.rbegin(); it != iterations.rend(); ++it)
    if (has_manifest(*it)) return it->string();
  throw CheckpointError(dir.string() + ": no complete iteration directory");
}

}  // namespace

LoadPathKind classify_load_path(const std::string& path) {
  const fs::path p = without_trailing_slash(path);
  const std::string name = p.filename().string();
  if (is_iteration_name(name) && (has_manifest(p) || has_manifest(aside_of(p))))
    return LoadPathKind::kIterationDir;
  std::error_code ec;
  const fs::file_status status = fs::status(p, ec);
  if (!fs::exists(status)) return LoadPathKind::kMissing;
  if (fs::is_directory(status)) {
    if (fs::exists(p / "latest")) return LoadPathKind::kCheckpointDir;
    return is_iteration_name(name) ? LoadPathKind::kIncompleteIteration
                                   : classify_without_latest(p);
  }
  return name == "latest" ? LoadPathKind::kLatestFile : LoadPathKind::kOtherFile;
}

std::string describe(LoadPathKind kind) {
  switch (kind) {
    case LoadPathKind::kCheckpointDir:
      return "a checkpoint directory";
    case LoadPathKind::kLatestFile:
      return "a checkpoint's `latest` file";
    case LoadPathKind::kIterationDir:
      return "an iteration directory";
    case LoadPathKind::kMissing:
      return "no such file or directory";
    case LoadPathKind::kCheckpointDirWithoutLatest:
      return "a checkpoint directory without `latest`";
    case LoadPathKind::kNoCheckpoint:
      return "a directory without `latest`";
    case LoadPathKind::kIncompleteCheckpointDir:
      return "a directory of iter_NNNNNNN directories none of which has manifest.json";
    case LoadPathKind::kIncompleteIteration:
      return "an iter_NNNNNNN directory without manifest.json";
    case LoadPathKind::kOtherFile:
      return "a file other than `latest`";
  }
  return "";
}

std::string expected_load_path() {
  return kLoadable;
}

bool has_checkpoint(const std::string& path) {
  const LoadPathKind kind = classify_load_path(path);
  return kind == LoadPathKind::kCheckpointDir || kind == LoadPathKind::kLatestFile ||
         kind == LoadPathKind::kIterationDir || kind == LoadPathKind::kCheckpointDirWithoutLatest;
}

std::string latest_checkpoint(const std::string& path) {
  const fs::path p = without_trailing_slash(path);
  const LoadPathKind kind = classify_load_path(path);
  switch (kind) {
    case LoadPathKind::kCheckpointDir:
      return named_by_latest(p, p / "latest");
    case LoadPathKind::kLatestFile:
      return named_by_latest(p.parent_path(), p);
    case LoadPathKind::kCheckpointDirWithoutLatest:
      return newest_complete_iteration(p);
    case LoadPathKind::kIterationDir:
      return has_manifest(p) ? p.string() : aside_of(p).string();
    default:
      throw CheckpointError(path + ": not a checkpoint (" + describe(kind) + "); " + kLoadable);
  }
}

std::string checkpoint_root(const std::string& path) {
  const LoadPathKind kind = classify_load_path(path);
  if (kind != LoadPathKind::kLatestFile && kind != LoadPathKind::kIterationDir) return path;
  const fs::path parent = without_trailing_slash(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

std::string iteration_checkpoint(const std::string& dir, long step) {
  const fs::path p = fs::path(dir) / iteration_dir(step);
  if (has_manifest(p) || has_manifest(aside_of(p))) return p.string();
  throw CheckpointError(dir + ": no checkpoint of iteration " + std::to_string(step) + " (" +
                        iteration_dir(step) + "); " + iterations_under(dir));
}

bool is_aside(const fs::path& checkpoint_dir) {
  return checkpoint_dir.extension() == kAsideSuffix;
}

}  // namespace trident::checkpoint
