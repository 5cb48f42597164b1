// The rules of --load and --ckpt-step against directories laid out by hand: what is refused
// names the path and what was expected; the --save directory may be missing or empty (a
// job's first start, resumed when the job restarts).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "test_util.h"
#include "train/checkpointing.h"

namespace trident::train {
namespace {

namespace fs = std::filesystem;

std::string all(const std::vector<std::string>& errors) {
  std::string out;
  for (const std::string& e : errors) out += e + "\n";
  return out;
}

struct Layout {
  fs::path root = testing::empty_temp_dir("checkpointing", "load_paths");
  fs::path ckpt = root / "ckpt";
  Layout() {
    for (const char* it : {"iter_0000002", "iter_0000004"}) {
      fs::create_directories(ckpt / it);
      std::ofstream(ckpt / it / "manifest.json") << "{}";
    }
    std::ofstream(ckpt / "latest") << "iter_0000004\n";
    fs::create_directories(root / "empty");
    std::ofstream(root / "empty_with_notes.txt") << "x";
  }
  std::string at(const std::string& name) const { return (root / name).string(); }
};

TrainingConfig loading(const std::string& load, const std::string& save = "", long step = -1) {
  TrainingConfig c;
  c.load = load, c.save = save, c.ckpt_step = step;
  return c;
}

TEST(LoadPathRules, CheckpointsInAnyOfTheirFormsAreAccepted) {
  Layout l;
  const std::string c = l.ckpt.string();
  for (const std::string& load : {c, c + "/", c + "/latest", c + "/iter_0000002"})
    EXPECT_TRUE(load_path_errors(loading(load)).empty())
        << load << ": " << all(load_path_errors(loading(load)));
  EXPECT_TRUE(load_path_errors(loading(c, "", 2)).empty());
  EXPECT_TRUE(load_path_errors(loading(c + "/latest", "", 2)).empty());
  EXPECT_TRUE(load_path_errors(loading(c + "/iter_0000004", "", 4)).empty());
  EXPECT_TRUE(has_checkpoint_to_resume(loading(c + "/iter_0000002")));
}

TEST(LoadPathRules, TheSaveDirectoryMayHoldNoCheckpointYet) {
  Layout l;
  for (const std::string& dir : {l.at("missing"), l.at("empty")}) {
    EXPECT_TRUE(load_path_errors(loading(dir, dir)).empty())
        << all(load_path_errors(loading(dir, dir)));
    EXPECT_TRUE(load_path_errors(loading(dir + "/", dir)).empty()) << dir;
    EXPECT_FALSE(has_checkpoint_to_resume(loading(dir, dir)));
  }
  // Fine-tuning needs weights to start from, first start or not.
  TrainingConfig finetune = loading(l.at("empty"), l.at("empty"));
  finetune.finetune = true;
  EXPECT_NE(all(load_path_errors(finetune)).find("not a checkpoint"), std::string::npos);
  EXPECT_NE(
      all(load_path_errors(loading(l.at("empty"), l.at("empty"), 3))).find("no checkpoint yet"),
      std::string::npos);
}

TEST(LoadPathRules, WhatIsNoCheckpointIsRefusedNamingPathAndExpectation) {
  Layout l;
  struct Case {
    std::string load, save, message;
  };
  const Case cases[] = {
      {l.at("missing"), "", l.at("missing") + ": not a checkpoint (no such file or directory)"},
      {l.at("missing"), l.at("elsewhere"), "only the --save directory may hold none yet"},
      {l.at("empty"), "", l.at("empty") + ": not a checkpoint (a directory without `latest`)"},
      {l.at("empty_with_notes.txt"), "", "(a file other than `latest`)"},
  };
  for (const Case& k : cases) {
    const std::string errors = all(load_path_errors(loading(k.load, k.save)));
    EXPECT_NE(errors.find("--load " + k.load), std::string::npos) << errors;
    EXPECT_NE(errors.find(k.message), std::string::npos) << errors;
    EXPECT_NE(errors.find("expected a checkpoint directory (holding `latest`), its `latest` file "
                          "or an iter_NNNNNNN directory"),
              std::string::npos)
        << errors;
  }
}

TEST(LoadPathRules, CkptStepNamesAnIterationThatIsThere) {
  Layout l;
  const std::string c = l.ckpt.string();
  EXPECT_NE(all(load_path_errors(loading(c, "", 3)))
                .find("--ckpt-step 3: " + c +
                      ": no checkpoint of iteration 3 (iter_0000003); it "
                      "holds iter_0000002, iter_0000004"),
            std::string::npos)
      << all(load_path_errors(loading(c, "", 3)));
  EXPECT_NE(all(load_path_errors(loading(c + "/iter_0000002", "", 4)))
                .find("--ckpt-step 4 asks for iter_0000004, --load names " + c + "/iter_0000002"),
            std::string::npos);
  EXPECT_NE(all(load_path_errors(loading("", "", 4))).find("--ckpt-step needs --load"),
            std::string::npos);
  EXPECT_NE(all(load_path_errors(loading(c, "", -5))).find("--ckpt-step must be >= 0"),
            std::string::npos);
  TrainingConfig scheduler;
  scheduler.override_opt_param_scheduler = true;
  EXPECT_NE(all(load_path_errors(scheduler)).find("--override-opt-param-scheduler needs --load"),
            std::string::npos);
}

}  // namespace
}  // namespace trident::train
