// `trident train --config FILE`: TOML configs parsed and validated without training. The
// configs fuzz/fuzz_train_config.cpp showed crashing, hanging or accepting numbers the trainer
// cannot use are kept here, each refused with its rule.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/train_args.h"
#include "config/batch_schedule.h"

namespace trident::train {
namespace {

struct Parsed {
  bool ok;
  int code;
  std::string errors;
};

Parsed parse_toml(const std::string& text) {
  // One file per process and call: CTest runs these cases as parallel processes.
  static int calls = 0;
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("trident_train_config_test_" + std::to_string(getpid()) +
                                      "_" + std::to_string(calls++) + ".toml");
  std::ofstream(path) << text;
  std::ostringstream captured;
  std::streambuf* saved = std::cerr.rdbuf(captured.rdbuf());
  TrainingConfig config;
  Parsed p;
  p.ok = cli::parse_train_args({"--config", path.string()}, &config, &p.code);
  std::cerr.rdbuf(saved);
  p.errors = captured.str();
  std::filesystem::remove(path);
  return p;
}

TEST(TrainConfig, AValidConfigParses) {
  Parsed p = parse_toml("mock-data = true\nnum-layers = 2\nlr = 3e-4\ntrain-iters = 10\n");
  EXPECT_TRUE(p.ok) << p.errors;
  EXPECT_EQ(p.code, 0);
}

// Megatron's rule for --account-for-*-in-pipeline-split: L + e + l divisible by p (and by p x N
// with virtual stages), not with the uneven-stage flags; --pipeline-split's names and clashes.
TEST(TrainConfig, PipelineSplitFlagsThatCannotDivideAreRefusedNamingTheFlag) {
  const std::string base = "mock-data = true\nnum-layers = 12\npipeline-model-parallel-size = 2\n";
  const std::pair<std::string, std::string> cases[] = {
      {"account-for-loss-in-pipeline-split = true\n",
       "--num-layers (12) plus 1 for --account-for-loss-in-pipeline-split (13) must be divisible "
       "by --pipeline-model-parallel-size (2)"},
      {"account-for-embedding-in-pipeline-split = true\n",
       "plus 1 for --account-for-embedding-in-pipeline-split (13) must be divisible"},
      {"account-for-embedding-in-pipeline-split = true\naccount-for-loss-in-pipeline-split = "
       "true\nnum-layers-per-virtual-pipeline-stage = 4\n",
       "layers per pipeline rank with --account-for-embedding-in-pipeline-split and "
       "--account-for-loss-in-pipeline-split (7) must be divisible by "
       "--num-layers-per-virtual-pipeline-stage (4)"},
      {"account-for-loss-in-pipeline-split = true\ndecoder-last-pipeline-num-layers = 3\n",
       "--account-for-loss-in-pipeline-split cannot be combined with "
       "--decoder-first/last-pipeline-num-layers"},
      {"pipeline-split = \"lopsided\"\n",
       "--pipeline-split must be balanced or even, got 'lopsided'"},
      {"pipeline-split = \"even\"\ndecoder-first-pipeline-num-layers = 8\n",
       "--pipeline-split cannot be combined with --decoder-first/last-pipeline-num-layers"},
      {"pipeline-split = \"balanced\"\nnum-layers-per-virtual-pipeline-stage = 3\n",
       "--pipeline-split balanced cannot be combined with --num-layers-per-virtual-pipeline-stage"},
  };
  for (const auto& [toml, message] : cases) {
    const Parsed p = parse_toml(base + toml);
    EXPECT_FALSE(p.ok) << toml;
    EXPECT_EQ(p.code, 2) << toml;
    EXPECT_NE(p.errors.find(message), std::string::npos) << toml << p.errors;
  }
  // Both flags at 12 layers: 14 over 2 divides (6 and 6 layers built).
  const Parsed both = parse_toml(base +
                                 "account-for-embedding-in-pipeline-split = true\n"
                                 "account-for-loss-in-pipeline-split = true\n");
  EXPECT_EQ(both.errors.find("account-for"), std::string::npos) << both.errors;
}

TEST(TrainConfig, FuzzedConfigsAreRefusedWithTheirRule) {
  struct Case {
    const char* toml;
    const char* message;
  };
  const Case cases[] = {
      // t x p overflowed an int to 0, and the world size was divided by it (SIGFPE).
      {"tensor-model-parallel-size = 65536\npipeline-model-parallel-size = 65536\n",
       "must be divisible by --tensor-model-parallel-size x --pipeline-model-parallel-size "
       "(65536 x 65536)"},
      // Iterations x global batch overflowed a long in the learning-rate schedule.
      {"train-iters = 9223372036854775807\n", "must stay below 2^62 samples"},
      {"train-iters = 1000\nlr-decay-iters = 4611686018427387904\n",
       "must stay below 2^62 samples"},
      {"train-iters = 1000\neval-interval = 1\neval-iters = 2147483647\n"
       "global-batch-size = 2147483644\n",
       "--eval-iters x the global batch x the evaluations must stay below 2^62 samples"},
      // The default FFN size 4h overflowed an int.
      {"hidden-size = 2147483647\nnum-attention-heads = 1\n",
       "--hidden-size (2147483647) is too large"},
      {"vocab-size = 2147483600\n", "padded to a multiple of --make-vocab-size-divisible-by"},
      // A ramp-up of 2^31 sizes was materialised (16 GB), one of 2^63 samples walked
      // iteration by iteration (a hang).
      {"micro-batch-size = 1\nglobal-batch-size = 2000000000\ntrain-samples = 4000000000\n"
       "rampup-batch-size = [1, 1, 1000]\n",
       "batch sizes, more than 65536"},
      {"micro-batch-size = 1\nglobal-batch-size = 8\ntrain-samples = 100\n"
       "rampup-batch-size = [1, 1, 9223372036854775807]\n",
       "the ramp-up samples must be >= 0 and below 2^62"},
      // Infinities passed the sign checks and reached the trainer.
      {"lr = inf\nmin-lr = 0.0\n", "--lr must be >= 0 and finite"},
      {"layernorm-epsilon = inf\n", "--norm-epsilon (--layernorm-epsilon) must be > 0 and finite"},
      {"init-method-std = inf\n", "--init-method-std must be > 0 and finite"},
      {"adam-eps = inf\n", "--adam-eps must be > 0 and finite"},
      {"clip-grad = inf\n", "--clip-grad must be >= 0 and finite"},
      {"fp16 = true\ninitial-loss-scale = inf\n", "--initial-loss-scale must be > 0 and finite"},
  };
  for (const Case& c : cases) {
    Parsed p = parse_toml(std::string("mock-data = true\n") + c.toml);
    EXPECT_FALSE(p.ok) << c.toml;
    EXPECT_EQ(p.code, 2) << c.toml;
    EXPECT_NE(p.errors.find(c.message), std::string::npos) << c.toml << "\n -> " << p.errors;
  }
}

// Found by fuzz/fuzz_train_config.cpp: CLI11 handed `key = []` to the option as no values and
// its conversion read the first of them (a segfault in the release build).
TEST(TrainConfig, EmptyListIsRefused) {
  for (const char* key :
       {"lr", "num-layers", "save-interval", "split", "data-path", "rampup-batch-size"}) {
    Parsed p = parse_toml(std::string("mock-data = true\n") + key + " = []\n");
    EXPECT_FALSE(p.ok) << key;
    EXPECT_EQ(p.code, 2) << key;
    EXPECT_NE(p.errors.find(std::string(key) + " = []: an empty list is no value"),
              std::string::npos)
        << key << " -> " << p.errors;
  }
  // Sections and their ends are not keys.
  Parsed p = parse_toml("mock-data = true\ntrain-iters = 5\n[extra]\n");
  EXPECT_EQ(p.errors.find("empty list"), std::string::npos) << p.errors;
}

// --lr-decay-style WSD needs its annealing length, within the decay, in the run's unit; its
// flags without WSD are refused (Megatron would ignore them).
TEST(TrainConfig, WsdFlagsAreChecked) {
  const std::string base = "mock-data = true\nmicro-batch-size = 2\nglobal-batch-size = 8\n";
  struct Case {
    const char* toml;
    const char* message;  // "": valid
  };
  const Case cases[] = {
      {"train-iters = 10\nlr-decay-style = \"WSD\"\nlr-wsd-decay-iters = 4\n", ""},
      {"train-iters = 10\nlr-decay-style = \"WSD\"\nlr-wsd-decay-iters = 10\n"
       "lr-wsd-decay-style = \"minus_sqrt\"\n",
       ""},
      {"train-samples = 80\nlr-decay-style = \"WSD\"\nlr-wsd-decay-samples = 20\n", ""},
      {"train-iters = 10\nlr-decay-style = \"inverse-square-root\"\nlr-warmup-iters = 2\n", ""},
      {"train-iters = 10\nlr-decay-style = \"WSD\"\n",
       "--lr-decay-style WSD needs the length of its annealing phase: --lr-wsd-decay-iters"},
      {"train-iters = 10\nlr-decay-style = \"WSD\"\nlr-wsd-decay-iters = 11\n",
       "--lr-wsd-decay-iters / --lr-wsd-decay-samples (88 samples) must be <= the decay length "
       "(80 samples"},
      {"train-iters = 10\nlr-decay-iters = 5\nlr-decay-style = \"WSD\"\nlr-wsd-decay-iters = 6\n",
       "(48 samples) must be <= the decay length (40 samples"},
      {"train-samples = 80\nlr-decay-style = \"WSD\"\nlr-wsd-decay-iters = 2\n",
       "takes --lr-wsd-decay-samples, not --lr-wsd-decay-iters"},
      {"train-iters = 10\nlr-decay-style = \"WSD\"\nlr-wsd-decay-samples = 16\n",
       "--lr-wsd-decay-samples needs sample-based training"},
      {"train-iters = 10\nlr-decay-style = \"WSD\"\nlr-wsd-decay-iters = -1\n",
       "--lr-wsd-decay-iters must be >= 0"},
      {"train-iters = 10\nlr-decay-style = \"WSD\"\nlr-wsd-decay-iters = 2\n"
       "lr-wsd-decay-style = \"square\"\n",
       "--lr-wsd-decay-style must be linear, cosine, exponential or minus_sqrt (got 'square')"},
      {"train-iters = 10\nlr-wsd-decay-iters = 2\n",
       "--lr-wsd-decay-style, --lr-wsd-decay-iters and --lr-wsd-decay-samples need "
       "--lr-decay-style WSD (got 'cosine')"},
      {"train-iters = 10\nlr-wsd-decay-style = \"linear\"\n", "need --lr-decay-style WSD"},
  };
  for (const Case& c : cases) {
    Parsed p = parse_toml(base + c.toml);
    EXPECT_EQ(p.ok, *c.message == 0) << c.toml << "\n -> " << p.errors;
    if (*c.message == 0) continue;
    EXPECT_EQ(p.code, 2) << c.toml;
    EXPECT_NE(p.errors.find(c.message), std::string::npos) << c.toml << "\n -> " << p.errors;
  }
}

// A ramp-up over 2^63 samples is counted a batch size at a time, at once.
TEST(TrainConfig, RampUpOfAnyLengthIsCountedAtOnce) {
  Parsed p = parse_toml(
      "mock-data = true\nmicro-batch-size = 1\nglobal-batch-size = 16\n"
      "rampup-batch-size = [1, 1, 4611686018427387000]\ntrain-samples = 4611686018427387000\n");
  EXPECT_TRUE(p.ok) << p.errors;
}

}  // namespace
}  // namespace trident::train
