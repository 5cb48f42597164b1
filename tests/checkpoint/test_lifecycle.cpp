// A checkpoint directory's life: `latest`, saves that replace an iteration, interrupted
// saves tidied up, --keep-checkpoints, each against the directory as the rules describe it.
#include <gtest/gtest.h>

#include <fstream>

#include "checkpoint/checkpoint_test_util.h"
#include "checkpoint/lifecycle.h"
#include "checkpoint/manifest.h"

namespace trident::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDir;

void touch_iteration(const fs::path& dir, const std::string& name) {
  fs::create_directories(dir / name);
  std::ofstream(dir / name / "manifest.json") << "{}";
}

TEST(CheckpointLifecycle, IterationNamesAndLatest) {
  EXPECT_EQ(iteration_dir(42), "iter_0000042");
  ScratchDir dir("trident-lifecycle-latest");
  EXPECT_FALSE(has_checkpoint(dir.str()));
  EXPECT_THROW(latest_checkpoint(dir.str()), CheckpointError);
  std::ofstream(dir.path / "latest") << "../elsewhere\n";
  EXPECT_THROW(latest_checkpoint(dir.str()), CheckpointError);  // outside the directory
}

TEST(CheckpointLifecycle, CommitReplacesAnIterationAndMovesLatest) {
  ScratchDir dir("trident-lifecycle-commit");
  touch_iteration(dir.path, "iter_0000005.tmp");
  commit(dir.path, dir.path / "iter_0000005.tmp", "iter_0000005", SaveFault::kNone);
  EXPECT_EQ(latest_checkpoint(dir.str()), (dir.path / "iter_0000005").string());
  // Saving the same iteration again (a run resumed at its last iteration) replaces it.
  touch_iteration(dir.path, "iter_0000005.tmp");
  std::ofstream(dir.path / "iter_0000005.tmp" / "marker") << "new";
  commit(dir.path, dir.path / "iter_0000005.tmp", "iter_0000005", SaveFault::kNone);
  EXPECT_TRUE(fs::exists(dir.path / "iter_0000005" / "marker"));
  EXPECT_FALSE(fs::exists(dir.path / "iter_0000005.old"));
  EXPECT_FALSE(fs::exists(dir.path / "iter_0000005.tmp"));
}

TEST(CheckpointLifecycle, AnInterruptedCommitLoadsFromTheCopyAsideThenIsTidied) {
  ScratchDir dir("trident-lifecycle-aside");
  // A commit died after moving iter_5 aside: latest still names iter_5.
  touch_iteration(dir.path, "iter_0000005.old");
  touch_iteration(dir.path, "iter_0000006.tmp");
  std::ofstream(dir.path / "latest") << "iter_0000005\n";
  const fs::path found = latest_checkpoint(dir.str());
  EXPECT_EQ(found, dir.path / "iter_0000005.old");
  EXPECT_TRUE(is_aside(found));
  tidy_interrupted_saves(dir.path);
  EXPECT_TRUE(fs::is_directory(dir.path / "iter_0000005"));  // renamed back
  EXPECT_FALSE(fs::exists(dir.path / "iter_0000005.old"));
  EXPECT_FALSE(fs::exists(dir.path / "iter_0000006.tmp"));  // never committed: removed
  EXPECT_EQ(latest_checkpoint(dir.str()), (dir.path / "iter_0000005").string());
}

TEST(CheckpointLifecycle, KeepsTheNewestCheckpoints) {
  ScratchDir dir("trident-lifecycle-keep");
  for (int it : {10, 20, 30, 40}) touch_iteration(dir.path, iteration_dir(it));
  remove_old_checkpoints(dir.path, 2);
  EXPECT_FALSE(fs::exists(dir.path / "iter_0000010"));
  EXPECT_FALSE(fs::exists(dir.path / "iter_0000020"));
  EXPECT_TRUE(fs::exists(dir.path / "iter_0000030"));
  EXPECT_TRUE(fs::exists(dir.path / "iter_0000040"));
}

}  // namespace
}  // namespace trident::checkpoint
