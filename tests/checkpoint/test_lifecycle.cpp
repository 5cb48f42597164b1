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

TEST(CheckpointLifecycle, WithoutLatestTheNewestCompleteIterationIsTheCheckpoint) {
  ScratchDir dir("trident-lifecycle-no-latest");
  // The first save died between its rename and `latest`; a later one is still a .tmp, and
  // iter_12 lost its manifest: iter_8 is the newest complete iteration.
  touch_iteration(dir.path, "iter_0000004");
  touch_iteration(dir.path, "iter_0000008");
  fs::create_directories(dir.path / "iter_0000012");
  touch_iteration(dir.path, "iter_0000016.tmp");
  EXPECT_EQ(classify_load_path(dir.str()), LoadPathKind::kCheckpointDirWithoutLatest);
  EXPECT_TRUE(has_checkpoint(dir.str()));
  EXPECT_EQ(latest_checkpoint(dir.str()), (dir.path / "iter_0000008").string());
}

TEST(CheckpointLifecycle, IterationsWithoutAManifestAreNeverAnEmptyDirectory) {
  ScratchDir dir("trident-lifecycle-incomplete");
  touch_iteration(dir.path, "iter_0000003.tmp");  // an interrupted first save: nothing yet
  EXPECT_EQ(classify_load_path(dir.str()), LoadPathKind::kNoCheckpoint);
  fs::create_directories(dir.path / "iter_0000002");  // damage: refused, not "empty"
  EXPECT_EQ(classify_load_path(dir.str()), LoadPathKind::kIncompleteCheckpointDir);
  EXPECT_FALSE(has_checkpoint(dir.str()));
  EXPECT_THROW(latest_checkpoint(dir.str()), CheckpointError);
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

// What --load may name, against a directory laid out by hand: iterations 2 and 4 committed,
// `latest` naming 4, an iteration directory whose save never finished, stray files.
TEST(CheckpointLifecycle, LoadPathsAreClassifiedAndResolved) {
  ScratchDir dir("trident-lifecycle-load-paths");
  const fs::path ckpt = dir.path / "ckpt";
  touch_iteration(ckpt, "iter_0000002");
  touch_iteration(ckpt, "iter_0000004");
  std::ofstream(ckpt / "latest") << "iter_0000004\n";
  fs::create_directories(dir.path / "unfinished" / "iter_0000007");
  fs::create_directories(dir.path / "empty");
  std::ofstream(dir.path / "notes.txt") << "x";
  const std::string c = ckpt.string();

  EXPECT_EQ(classify_load_path(c), LoadPathKind::kCheckpointDir);
  EXPECT_EQ(classify_load_path(c + "/"), LoadPathKind::kCheckpointDir);
  EXPECT_EQ(classify_load_path(c + "/latest"), LoadPathKind::kLatestFile);
  EXPECT_EQ(classify_load_path(c + "/iter_0000002"), LoadPathKind::kIterationDir);
  EXPECT_EQ(classify_load_path(c + "/iter_0000002/"), LoadPathKind::kIterationDir);
  EXPECT_EQ(classify_load_path((dir.path / "missing").string()), LoadPathKind::kMissing);
  EXPECT_EQ(classify_load_path((dir.path / "empty").string()), LoadPathKind::kNoCheckpoint);
  EXPECT_EQ(classify_load_path((dir.path / "notes.txt").string()), LoadPathKind::kOtherFile);
  EXPECT_EQ(classify_load_path((dir.path / "unfinished" / "iter_0000007").string()),
            LoadPathKind::kIncompleteIteration);

  EXPECT_EQ(latest_checkpoint(c), (ckpt / "iter_0000004").string());
  EXPECT_EQ(latest_checkpoint(c + "/latest"), (ckpt / "iter_0000004").string());
  EXPECT_EQ(latest_checkpoint(c + "/iter_0000002"), (ckpt / "iter_0000002").string());
  EXPECT_EQ(checkpoint_root(c + "/latest"), c);
  EXPECT_EQ(checkpoint_root(c + "/iter_0000002"), c);
  EXPECT_EQ(checkpoint_root(c), c);
  EXPECT_EQ(iteration_checkpoint(c, 2), (ckpt / "iter_0000002").string());
  try {
    iteration_checkpoint(c, 3);
    ADD_FAILURE() << "iteration 3 is not there";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("no checkpoint of iteration 3 (iter_0000003); it holds "
                                         "iter_0000002, iter_0000004"),
              std::string::npos)
        << e.what();
  }
  for (const char* bad : {"missing", "empty", "notes.txt"}) {
    const std::string path = (dir.path / bad).string();
    EXPECT_FALSE(has_checkpoint(path)) << bad;
    try {
      latest_checkpoint(path);
      ADD_FAILURE() << bad;
    } catch (const CheckpointError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path + ": not a checkpoint (", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace trident::checkpoint
