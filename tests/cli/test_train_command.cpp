// `trident train` end to end: training learns and is repeatable, bad flags are all reported at
// once with a non-zero exit, TOML configs, uniform recomputation, Megatron datasets, and the
// HuggingFace round trip (--save-hf, --load-hf, read back by `trident score`).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/cli_test_util.h"

namespace {

namespace fs = std::filesystem;
using namespace trident::cli_test;

TEST(TrainCommand, LossFallsAndRunsAreBitForBitRepeatable) {
  std::string dir = temp_dir("repeat");
  CommandResult a = run(kTiny + "--train-iters 60 --seed 11 --metrics-file " + dir + "/a.jsonl");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("memory plan"), std::string::npos);
  EXPECT_NE(a.output.find("validation loss at iteration 60"), std::string::npos);
  CommandResult b =
      run(kTiny + "--train-iters 60 --seed 11 --threads 1 --metrics-file " + dir + "/b.jsonl");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  auto ma = read_metrics(dir + "/a.jsonl"), mb = read_metrics(dir + "/b.jsonl");
  ASSERT_EQ(ma.size(), 13u);  // 12 log lines, 1 validation (one rank: no collectives)
  ASSERT_EQ(ma.size(), mb.size());
  for (size_t i = 0; i < 12; ++i) {
    for (const char* key : {"iteration", "consumed_samples", "loss", "lr", "grad_norm"})
      EXPECT_EQ(ma[i][key], mb[i][key]) << key << " at line " << i;
    for (const char* key : {"ms_per_iter", "tokens_per_s", "tflops", "mfu"})
      EXPECT_TRUE(ma[i].contains(key));
  }
  double first = ma.front()["loss"], last = ma[11]["loss"];
  EXPECT_GT(first, 5.0);         // ~ln(256) at initialisation
  EXPECT_LT(last, first - 1.5);  // the arithmetic runs are being learned
  EXPECT_EQ(ma[12]["validation_loss"], mb[12]["validation_loss"]);
  CommandResult c = run(kTiny + "--train-iters 10 --seed 12 --log-interval 10 --metrics-file " +
                        dir + "/c.jsonl");
  EXPECT_NE(read_metrics(dir + "/c.jsonl")[0]["loss"], ma[1]["loss"]);
}

TEST(TrainCommand, ReportsEveryInvalidArgumentAtOnce) {
  CommandResult r =
      run("train --mock-data --hidden-size 100 --num-attention-heads 12 --seq-length 512 "
          "--max-position-embeddings 256 --micro-batch-size 3 --global-batch-size 8 "
          "--lr 1e-4 --min-lr 1e-3 --lr-decay-style exponential --tensor-model-parallel-size 2");
  EXPECT_EQ(r.exit_code, 2);
  for (const char* msg :
       {"--hidden-size (100) must be divisible by --num-attention-heads (12)",
        "--seq-length (512) must be <= --max-position-embeddings (256)",
        "--global-batch-size (8) must be divisible by --micro-batch-size", "--min-lr",
        "--lr-decay-style must be constant, linear, cosine, inverse-square-root or WSD",
        "world size (1) must be divisible by --tensor-model-parallel-size"})
    EXPECT_NE(r.output.find(msg), std::string::npos) << "missing: " << msg << "\n" << r.output;
}

TEST(TrainCommand, UnknownFlagAndMissingDataAreErrors) {
  CommandResult unknown = run("train --mock-data --no-such-flag 3");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("no-such-flag"), std::string::npos);
  CommandResult no_data = run("train --train-iters 1");
  EXPECT_EQ(no_data.exit_code, 2);
  EXPECT_NE(no_data.output.find("exactly one data source"), std::string::npos);
  CommandResult bad_value = run("train --mock-data --num-layers abc");
  EXPECT_EQ(bad_value.exit_code, 2);
}

TEST(TrainCommand, ConfigFileWithCommandLineOverride) {
  std::string dir = temp_dir("config");
  std::ofstream(dir + "/run.toml") << "num-layers = 1\nhidden-size = 32\nnum-attention-heads = 2\n"
                                      "seq-length = 16\nvocab-size = 64\nmicro-batch-size = 2\n"
                                      "train-iters = 3\nmock-data = true\nlog-interval = 1\n";
  CommandResult r = run("train --config " + dir + "/run.toml --hidden-size 48 --peak-tflops 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 layers, hidden 48"), std::string::npos) << r.output;
}

// One line of the printed memory plan: "    <name>  <floats> floats [x <copies>]  <size>".
struct PlanLine {
  long floats = 0;
  int copies = 0;  // 0: the plan has no such line
};

PlanLine plan_line(const std::string& output, const std::string& name) {
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("    " + name + " ", 0) != 0) continue;
    std::istringstream fields(line.substr(4 + name.size()));
    PlanLine p{0, 1};
    std::string word, x;
    fields >> p.floats >> word >> x;
    if (x == "x") fields >> p.copies;
    return p;
  }
  return {};
}

// --recompute-method uniform keeps one layer output per group of --recompute-num-layers
// layers (the next group's input) and recomputes a whole group at once in backward, so
// the group's layers have recompute buffers; losses and gradient norms do not change.
TEST(TrainCommand, UniformRecomputeKeepsOneInputPerGroup) {
  const std::string four_layers =
      kTiny + "--num-layers 4 --train-iters 2 --lr-warmup-iters 0 --log-interval 1 ";
  const std::string dir = temp_dir("uniform");
  CommandResult plain = run(four_layers + "--metrics-file " + dir + "/plain.jsonl");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto reference = read_metrics(dir + "/plain.jsonl");
  const long tokens_x_hidden = 4L * 64 * 64;  // micro-batch x seq x hidden
  // N, kept layer outputs (ceil(4 / N)), layers recomputed together (N, at most 4)
  for (auto [n, kept, group] : {std::array{1, 4, 1}, {2, 2, 2}, {3, 2, 3}, {4, 1, 4}, {6, 1, 4}}) {
    const std::string name = "N" + std::to_string(n);
    CommandResult r = run(four_layers +
                          "--recompute-granularity full --recompute-method uniform "
                          "--recompute-num-layers " +
                          std::to_string(n) + " --metrics-file " + dir + "/" + name + ".jsonl");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const PlanLine outputs = plan_line(r.output, "layer output");
    EXPECT_EQ(outputs.floats, tokens_x_hidden) << name;
    EXPECT_EQ(outputs.copies, kept) << name << "\n" << r.output;
    EXPECT_EQ(plan_line(r.output, "recompute: qkv").copies, group) << name;
    EXPECT_EQ(plan_line(r.output, "recompute: outputs within a group").copies,
              group > 1 ? group - 1 : 0)
        << name;
    const auto m = read_metrics(dir + "/" + name + ".jsonl");
    for (size_t i = 0; i < 2; ++i)
      for (const char* key : {"loss", "grad_norm"})
        EXPECT_EQ(m.at(i)[key], reference.at(i)[key]) << name << " " << key;
  }
  CommandResult zero = run(four_layers +
                           "--recompute-granularity full --recompute-method uniform "
                           "--recompute-num-layers 0");
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.output.find("--recompute-num-layers > 0"), std::string::npos) << zero.output;
}

TEST(TrainCommand, TrainsOnAMegatronDatasetWithValidation) {
  std::string dir = temp_dir("kjv");
  CommandResult r =
      run("train --data-path " + kData + "/kjv/kjv_text_document --split 90,5,5" + kTokenizer +
          "--data-cache-path " + dir +
          "/cache --num-layers 1 "
          "--hidden-size 32 --num-attention-heads 2 --seq-length 32 --micro-batch-size 4 "
          "--global-batch-size 8 --train-iters 6 --eval-interval 3 --eval-iters 1 "
          "--log-interval 3 --peak-tflops 1 "
          "--metrics-file " +
          dir + "/m.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto m = read_metrics(dir + "/m.jsonl");
  int validations = 0;
  for (const auto& row : m) validations += row.contains("validation_loss");
  EXPECT_EQ(validations, 2);  // at iteration 3 and at the end
  EXPECT_NE(r.output.find("test loss at the end"), std::string::npos);
  EXPECT_NE(r.output.find("vocab 50257 padded to 50304"), std::string::npos);
}

TEST(TrainCommand, DataArgumentsAreValidated) {
  CommandResult r = run("train --data-path 0.5 a b --split 1,x --vocab-file v.json");
  EXPECT_EQ(r.exit_code, 2);
  for (const char* msg : {"--data-path takes one prefix, or weight/prefix pairs",
                          "--split '1,x' must be up to three non-negative numbers",
                          "--vocab-file and --merge-file go together"})
    EXPECT_NE(r.output.find(msg), std::string::npos) << msg << "\n" << r.output;
  CommandResult w = run("train --data-path -1 a 2 b --train-iters 1");
  EXPECT_NE(w.output.find("weight '-1' (before a) must be a positive number"), std::string::npos)
      << w.output;
  CommandResult missing =
      run("train --data-path /nonexistent/prefix --train-iters 1 --num-layers 1 "
          "--hidden-size 32 --num-attention-heads 2 --seq-length 16 --peak-tflops 1");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("--data-path: /nonexistent/prefix.bin does not exist"),
            std::string::npos)
      << missing.output;
}

TEST(HfInterchange, SaveLoadScoreRoundTrip) {
  std::string dir = temp_dir("hf");
  CommandResult trained =
      run(kTiny + "--train-iters 5 --lr-warmup-iters 0 --save-hf " + dir + "/model");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  ASSERT_TRUE(fs::exists(dir + "/model/model.safetensors"));
  auto config = nlohmann::json::parse(std::ifstream(dir + "/model/config.json"));
  EXPECT_EQ(config["n_layer"], 2);
  EXPECT_EQ(config["vocab_size"], 256);
  // Loading and saving again without training gives the same tensors.
  CommandResult again = run(
      kTiny + "--train-iters 1 --lr-warmup-iters 0 --lr 0 --min-lr 0 --weight-decay 0 --load-hf " +
      dir + "/model --save-hf " + dir + "/model2");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  std::ofstream(dir + "/tokens.json") << "[[1,2,3,4,5,6,7,8],[9,10,11]]";
  CommandResult s1 = run("score --model " + dir + "/model --tokens " + dir + "/tokens.json");
  CommandResult s2 = run("score --model " + dir + "/model2 --tokens " + dir + "/tokens.json");
  ASSERT_EQ(s1.exit_code, 0) << s1.output;
  auto j1 = nlohmann::json::parse(s1.output), j2 = nlohmann::json::parse(s2.output);
  EXPECT_EQ(j1["tokens"], 9);
  EXPECT_EQ(j1["loss"], j2["loss"]);
  EXPECT_NEAR(std::exp(j1["loss"].get<double>()), j1["perplexity"].get<double>(), 1e-9);
  // A config that disagrees with the weights: every tensor is shape-checked on load.
  auto wrong = config;
  wrong["n_positions"] = 32;
  std::ofstream(dir + "/model2/config.json") << wrong.dump();
  CommandResult shape = run("score --model " + dir + "/model2 --tokens " + dir + "/tokens.json");
  EXPECT_EQ(shape.exit_code, 2);
  EXPECT_NE(shape.output.find("tensor 'wpe.weight' has shape [64, 64], the config needs [32, 64]"),
            std::string::npos)
      << shape.output;
  // Flags that contradict the loaded config are errors, not silent overrides.
  CommandResult clash =
      run(kTiny + "--train-iters 1 --lr-warmup-iters 0 --load-hf " + dir + "/model --num-layers 3");
  EXPECT_EQ(clash.exit_code, 2);
  EXPECT_NE(clash.output.find("--num-layers (3) disagrees with"), std::string::npos)
      << clash.output;
}

}  // namespace
