// Defaults found beside the installation: a binary at <root>/build/trident finds
// <root>/data/..., whatever the working directory; built files on a scratch tree.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/install_paths.h"
#include "test_util.h"

namespace fs = std::filesystem;
using trident::installed_path_for;
using trident::testing::empty_temp_dir;

TEST(InstalledPath, FindsDataBesideTheBinarysBuildFolder) {
  const fs::path root = empty_temp_dir("install_paths", "repository");
  fs::create_directories(root / "build");
  fs::create_directories(root / "data" / "gpt2");
  std::ofstream(root / "data" / "gpt2" / "encoder.json") << "{}";
  EXPECT_EQ(installed_path_for(root / "build" / "trident", "data/gpt2/encoder.json"),
            (root / "data" / "gpt2" / "encoder.json").string());
  // A binary installed beside its data (bin/trident, bin/data) finds it too.
  fs::create_directories(root / "bin" / "data" / "tasks");
  EXPECT_EQ(installed_path_for(root / "bin" / "trident", "data/tasks"),
            (root / "bin" / "data" / "tasks").string());
}

TEST(InstalledPath, LeavesThePathAsGivenWhenTheInstallationLacksIt) {
  const fs::path root = empty_temp_dir("install_paths", "bare");
  fs::create_directories(root / "build");
  EXPECT_EQ(installed_path_for(root / "build" / "trident", "data/tasks"), "data/tasks");
}
