// `trident preprocess` end to end: a bad line fails with exit code 2 and no output (or is
// skipped), and --workers writes the one-worker dataset byte for byte.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "cli/cli_test_util.h"

namespace {

namespace fs = std::filesystem;
using namespace trident::cli_test;

TEST(PreprocessCommand, BadLineFailsWithExitCodeAndNoOutput) {
  std::string dir = temp_dir("preprocess_bad");
  std::ofstream(dir + "/in.jsonl") << "{\"text\": \"fine\"}\n{\"text\": \"broken\"\n";
  CommandResult r =
      run("preprocess --input " + dir + "/in.jsonl --output-prefix " + dir + "/out" + kTokenizer);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("in.jsonl:2: invalid JSON"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir + "/out_text_document.bin"));
  EXPECT_FALSE(fs::exists(dir + "/out_text_document.bin.tmp"));
  CommandResult skip = run("preprocess --input " + dir + "/in.jsonl --output-prefix " + dir +
                           "/out" + kTokenizer + "--on-bad-line skip");
  EXPECT_EQ(skip.exit_code, 0) << skip.output;
  EXPECT_NE(skip.output.find("skipped 1 bad lines"), std::string::npos) << skip.output;
  EXPECT_TRUE(fs::exists(dir + "/out_text_document.idx"));
}

// `trident preprocess --workers N` tokenizes batches on N threads and writes them in input
// order: the dataset is byte for byte the one-worker dataset (scripts/sanitize.sh thread
// runs this under ThreadSanitizer).
TEST(PreprocessCommand, WorkersWriteTheSameDataset) {
  std::string dir = temp_dir("preprocess_workers");
  {
    std::ofstream in(dir + "/in.jsonl");
    for (int i = 0; i < 2500; ++i)
      in << "{\"text\": \"Line " << i << ": and the " << i % 13 << " said unto " << i * 7
         << "\"}\n";
  }
  std::map<int, std::string> files;
  for (int workers : {1, 4}) {
    const std::string prefix = dir + "/w" + std::to_string(workers);
    CommandResult r = run("preprocess --input " + dir + "/in.jsonl --output-prefix " + prefix +
                          kTokenizer + "--append-eod --workers " + std::to_string(workers));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("2500 documents"), std::string::npos) << r.output;
    for (const char* ext : {".bin", ".idx"}) {
      std::ifstream f(prefix + "_text_document" + ext, std::ios::binary);
      files[workers] += std::string(std::istreambuf_iterator<char>(f), {});
    }
  }
  EXPECT_GT(files[1].size(), 2500u * 8);
  EXPECT_EQ(files[1], files[4]);
}

}  // namespace
