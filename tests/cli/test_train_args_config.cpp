// `trident train --config FILE`: every key must be a flag (no tables), named with the nearest
// one when it is not; command-line flags replace the config's keys of the same concept; the
// example configs in configs/ load. Expected values are worked out by hand from the files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/train_args.h"
#include "cli/train_args_config.h"
#include "test_util.h"

namespace trident::cli {
namespace {

namespace fs = std::filesystem;

struct Parsed {
  bool ok;
  int code;
  std::string out, err;
  train::TrainingConfig config;
};

Parsed parse(const std::vector<std::string>& args, int world_size = 1) {
  std::ostringstream out, err;
  std::streambuf* saved_out = std::cout.rdbuf(out.rdbuf());
  std::streambuf* saved_err = std::cerr.rdbuf(err.rdbuf());
  Parsed p;
  p.config.world_size = world_size;
  p.ok = parse_train_args(args, &p.config, &p.code);
  std::cout.rdbuf(saved_out), std::cerr.rdbuf(saved_err);
  p.out = out.str(), p.err = err.str();
  return p;
}

std::string write_config(const std::string& name, const std::string& text) {
  const std::string path = testing::empty_temp_dir("train_args_config", name) + "/run.toml";
  std::ofstream(path) << text;
  return path;
}

// The example configs name their data relative to the repository.
struct InSourceDir {
  fs::path before = fs::current_path();
  InSourceDir() { fs::current_path(TRIDENT_SOURCE_DIR); }
  ~InSourceDir() { fs::current_path(before); }
};

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(NearestName, FindsMisspellingsAndUnderscores) {
  const std::vector<std::string> flags = {"hidden-size", "num-layers", "lr", "min-lr"};
  EXPECT_EQ(nearest_name("hiden-size", flags), "hidden-size");  // one letter missing
  EXPECT_EQ(nearest_name("num_layers", flags), "num-layers");   // underscores
  EXPECT_EQ(nearest_name("num-layer", flags), "num-layers");
  EXPECT_EQ(nearest_name("minlr", flags), "min-lr");
  EXPECT_EQ(nearest_name("batch", flags), "");  // nothing close: no guess
}

TEST(TrainConfigFile, UnknownKeysAndTablesAreRefusedWithTheNearestFlag) {
  const std::string path =
      write_config("unknown",
                   "mock-data = true\nhiden-size = 64\nnum_layers = 2\nzzzz = 1\n[model]\n"
                   "num-layers = 3\nheads = 2\n");
  Parsed p = parse({"--config", path});
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.code, 2);
  EXPECT_TRUE(has(p.err, path + ": 5 problems")) << p.err;
  EXPECT_TRUE(has(p.err, "unknown key 'hiden-size': did you mean 'hidden-size' (--hidden-size)?"))
      << p.err;
  EXPECT_TRUE(has(p.err, "unknown key 'num_layers': did you mean 'num-layers' (--num-layers)?"));
  EXPECT_TRUE(has(p.err, "unknown key 'zzzz' (no flag is near it"));
  EXPECT_TRUE(has(p.err, "[model]: a table; the config has none"));
  EXPECT_TRUE(has(p.err, "[model] unknown key 'heads': did you mean 'threads' (--threads)?"));
}

TEST(TrainConfigFile, EveryExampleConfigLoads) {
  InSourceDir here;
  // MT-NLG 530B is laid out for 2240 ranks and names no data or checkpoint directory (its
  // comment says to add them; parsing writes nothing).
  Parsed big =
      parse({"--config", "configs/mt-nlg-530b.toml", "--mock-data", "--save", "ckpt"}, 2240);
  EXPECT_TRUE(big.ok) << big.err;
  EXPECT_EQ(big.config.model.num_layers, 105);
  EXPECT_EQ(big.config.model.hidden_size, 20480);
  EXPECT_EQ(big.config.train_samples, 131835937);
  EXPECT_EQ(big.config.lr_decay_samples, 166015625);
  Parsed scaled = parse({"--config", "configs/mt-nlg-scaled.toml"});
  EXPECT_TRUE(scaled.ok) << scaled.err;
  EXPECT_EQ(scaled.config.model.hidden_size, 256);
  EXPECT_EQ(scaled.config.train_samples, 4320);
  EXPECT_EQ(scaled.config.rampup_batch_size, (std::vector<long>{4, 4, 640}));
  // The demo's (scripts/demo.sh): the Llama-style block with the KJV tokenizer.
  Parsed demo = parse({"--config", "configs/kjv-demo.toml"});
  EXPECT_TRUE(demo.ok) << demo.err;
  EXPECT_EQ(demo.config.model.num_layers, 4);
  EXPECT_TRUE(demo.config.model.rms_norm() && demo.config.model.rope() && demo.config.model.swiglu);
  EXPECT_EQ(demo.config.train_iters, 700);
  int configs = 0;
  for (const auto& e : fs::directory_iterator("configs"))
    configs += e.path().extension() == ".toml";
  EXPECT_EQ(configs, 3) << "a new example config: load it here too";
}

// The scaled recipe's batch grows 4 -> 32 in 7 steps of 4 over 640 samples: one step every
// 640 / 7 = 91.43 samples, so batch 4 for the iterations starting at 0, 4, ..., 88 (23 of
// them, 92 samples), then batch 8 while fewer than 182.86 samples are consumed.
TEST(TrainConfigFile, CommandLineLengthsReplaceTheConfigsOfTheOtherKind) {
  InSourceDir here;
  Parsed iters = parse({"--config", "configs/mt-nlg-scaled.toml", "--train-iters", "30"});
  ASSERT_TRUE(iters.ok) << iters.err;
  EXPECT_EQ(iters.config.train_iters, 0);  // still sample-based: ramp-up and LR in samples
  EXPECT_EQ(iters.config.train_samples, 23 * 4 + 7 * 8);
  EXPECT_EQ(iters.config.total_train_iters(), 30);
  EXPECT_EQ(iters.config.lr_decay_samples, 5440);
  EXPECT_TRUE(has(iters.out,
                  "note: --train-iters on the command line replaces train-samples = 4320 of "
                  "configs/mt-nlg-scaled.toml: the run stays sample-based, its 30 iterations "
                  "being 148 samples"))
      << iters.out;
  // The run: 48 samples are 12 iterations of batch 4, not the whole ramp-up.
  Parsed samples = parse({"--config", "configs/mt-nlg-scaled.toml", "--train-samples", "48"});
  ASSERT_TRUE(samples.ok) << samples.err;
  EXPECT_EQ(samples.config.total_train_iters(), 12);
  EXPECT_EQ(samples.config.total_train_samples(), 48);
}

TEST(TrainConfigFile, TrainSamplesOverAnIterationConfigCarriesItsScheduleInSamples) {
  const std::string path =
      write_config("iterations",
                   "mock-data = true\nmicro-batch-size = 2\nglobal-batch-size = 8\n"
                   "train-iters = 100\nlr-warmup-iters = 10\nlr-decay-iters = 80\n");
  Parsed p = parse({"--config", path, "--train-samples", "480"});
  ASSERT_TRUE(p.ok) << p.err;
  EXPECT_EQ(p.config.train_iters, 0);
  EXPECT_EQ(p.config.train_samples, 480);
  EXPECT_EQ(p.config.total_train_iters(), 60);
  EXPECT_EQ(p.config.lr_warmup_iters, 0);
  EXPECT_EQ(p.config.lr_warmup_samples, 80);  // 10 x 8
  EXPECT_EQ(p.config.lr_decay_samples, 640);  // 80 x 8
  EXPECT_TRUE(has(p.out, "lr-warmup-iters 10 become 80 samples and lr-decay-iters 80 become 640"))
      << p.out;
  // A warm-up given on the command line replaces the config's, of either kind.
  Parsed warm = parse({"--config", path, "--train-samples", "480", "--lr-warmup-samples", "24"});
  ASSERT_TRUE(warm.ok) << warm.err;
  EXPECT_EQ(warm.config.lr_warmup_samples, 24);
  EXPECT_EQ(warm.config.lr_decay_samples, 640);
}

TEST(TrainConfigFile, OtherConceptsAndSameKeysAreReplacedByTheCommandLine) {
  const std::string path =
      write_config("concepts",
                   "data-path = [\"nowhere/none\"]\nbf16 = true\nlayernorm-epsilon = 1e-6\n"
                   "hidden-size = 32\nnum-attention-heads = 2\ntrain-iters = 5\n");
  Parsed p = parse({"--config", path, "--mock-data", "--fp16", "--norm-epsilon", "0.001",
                    "--hidden-size", "48"});
  ASSERT_TRUE(p.ok) << p.err;  // the config's data path, which does not exist, is not read
  EXPECT_TRUE(p.config.mock_data);
  EXPECT_TRUE(p.config.data_path.empty());
  EXPECT_TRUE(p.config.fp16);
  EXPECT_FALSE(p.config.bf16);
  EXPECT_FLOAT_EQ(p.config.model.layernorm_epsilon, 0.001f);
  EXPECT_EQ(p.config.model.hidden_size, 48);
  EXPECT_TRUE(has(p.out, "note: --mock-data on the command line replaces data-path = nowhere/none"))
      << p.out;
  EXPECT_TRUE(has(p.out, "note: --fp16 on the command line replaces bf16 = true"));
}

}  // namespace
}  // namespace trident::cli
