// `trident score` end to end: clear errors for bad token files, models and weights, and text
// scored through the tokenizer like its ids.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_test_util.h"

namespace {

namespace fs = std::filesystem;
using namespace trident::cli_test;

TEST(ScoreCommand, BadInputsGetClearErrors) {
  std::string dir = temp_dir("score_bad");
  CommandResult trained =
      run(kTiny + "--train-iters 1 --lr-warmup-iters 0 --save-hf " + dir + "/model");
  ASSERT_EQ(trained.exit_code, 0);
  std::ofstream(dir + "/range.json") << "[1, 2, 999]";
  std::ofstream(dir + "/bad.json") << "[1, 2,";
  std::ofstream(dir + "/short.json") << "[5]";
  CommandResult range = run("score --model " + dir + "/model --tokens " + dir + "/range.json");
  EXPECT_EQ(range.exit_code, 2);
  EXPECT_NE(range.output.find("token 2 is 999, not an id in [0, 256)"), std::string::npos)
      << range.output;
  EXPECT_EQ(run("score --model " + dir + "/model --tokens " + dir + "/bad.json").exit_code, 2);
  EXPECT_EQ(run("score --model " + dir + "/model --tokens " + dir + "/short.json").exit_code, 2);
  CommandResult missing = run("score --model " + dir + "/nope --tokens " + dir + "/range.json");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.output.find("config.json"), std::string::npos);
  // A truncated weights file is rejected with the file's name.
  fs::resize_file(dir + "/model/model.safetensors", 1000);
  std::ofstream(dir + "/ok.json") << "[1, 2, 3]";
  CommandResult truncated = run("score --model " + dir + "/model --tokens " + dir + "/ok.json");
  EXPECT_EQ(truncated.exit_code, 2);
  EXPECT_NE(truncated.output.find("model.safetensors"), std::string::npos) << truncated.output;
}

TEST(ScoreCommand, ScoresTextThroughTheTokenizer) {
  std::string dir = temp_dir("score_text");
  CommandResult trained =
      run("train --mock-data --num-layers 1 --hidden-size 32 --num-attention-heads 2 "
          "--seq-length 16 --train-iters 1 --peak-tflops 1 --save-hf " +
          dir + "/m");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  std::ofstream(dir + "/t.txt") << "Hello world, hello world.";
  std::ofstream(dir + "/ids.json") << "[15496, 995, 11, 23748, 995, 13]";
  CommandResult text = run("score --model " + dir + "/m --text " + dir + "/t.txt" + kTokenizer);
  CommandResult ids = run("score --model " + dir + "/m --tokens " + dir + "/ids.json");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_EQ(nlohmann::json::parse(text.output), nlohmann::json::parse(ids.output));
  // Without tokenizer flags: GPT-2's files from the installation's data/gpt2/, as generate's.
  CommandResult by_default = run("score --model " + dir + "/m --text " + dir + "/t.txt");
  ASSERT_EQ(by_default.exit_code, 0) << by_default.output;
  EXPECT_EQ(nlohmann::json::parse(by_default.output), nlohmann::json::parse(ids.output));
  EXPECT_EQ(run("score --model " + dir + "/m --text " + dir +
                "/t.txt --tokenizer-type SentencePieceTokenizer")
                .exit_code,
            2);
}

}  // namespace
