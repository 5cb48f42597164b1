// The preprocess pipeline: bad input lines (fail with the line number and leave nothing, or
// are skipped and counted), and workers and JSON keys that do not change the output.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "data/data_test_util.h"
#include "data/indexed_dataset.h"
#include "data/preprocess.h"
#include "tokenizer/gpt2_tokenizer.h"

namespace trident::data {
namespace {

namespace fs = std::filesystem;
using namespace data_test;

const std::string kVocab = std::string(TRIDENT_SOURCE_DIR) + "/data/gpt2/encoder.json";

const std::string kMerges = std::string(TRIDENT_SOURCE_DIR) + "/data/gpt2/vocab.bpe";

std::string write_jsonl(const std::string& dir, const std::vector<std::string>& lines) {
  std::string path = dir + "/in.jsonl";
  std::ofstream f(path, std::ios::binary);
  for (const std::string& l : lines) f << l << "\n";
  return path;
}

PreprocessOptions options(const std::string& input, const std::string& dir) {
  PreprocessOptions o;
  o.input = input;
  o.output_prefix = dir + "/out";
  o.tokenizer.vocab_file = kVocab;
  o.tokenizer.merge_file = kMerges;
  o.append_eod = true;
  return o;
}

TEST(Preprocess, BadLinesFailWithLineNumberAndLeaveNoOutput) {
  std::string dir = temp_dir("bad_fail");
  std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"text\": \"ok\"", "invalid JSON"},
      {"{\"other\": \"x\"}", "missing key \"text\""},
      {"{\"text\": \"bad \xff byte\"}", "invalid UTF-8"},
      {"[1, 2]", "not a JSON object"},
      {"{\"text\": 5}", "key \"text\" is not a string"}};
  for (const auto& [line, reason] : cases) {
    std::string input = write_jsonl(dir, {"{\"text\": \"good\"}", line});
    std::ostringstream progress;
    try {
      preprocess(options(input, dir), progress);
      ADD_FAILURE() << "no error for " << line;
    } catch (const BadLineError& e) {
      EXPECT_NE(std::string(e.what()).find(input + ":2: " + reason), std::string::npos) << e.what();
    }
    for (auto& entry : fs::directory_iterator(dir))
      EXPECT_EQ(entry.path().extension(), ".jsonl") << "left behind: " << entry.path();
  }
}

TEST(Preprocess, SkipModeCountsAndReportsLines) {
  std::string dir = temp_dir("bad_skip");
  std::string input = write_jsonl(dir, {"{\"text\": \"one\"}", "garbage", "{\"text\": \"\"}",
                                        "{\"text\": \"two\"}", "{\"nope\": 1}"});
  PreprocessOptions o = options(input, dir);
  o.skip_bad_lines = true;
  std::ostringstream progress;
  PreprocessReport r = preprocess(o, progress);
  EXPECT_EQ(r.lines, 5);
  EXPECT_EQ(r.bad_lines, 2);
  EXPECT_EQ(r.empty_documents, 1);
  EXPECT_EQ(r.documents, 2);
  ASSERT_EQ(r.bad_line_messages.size(), 2u);
  EXPECT_EQ(r.bad_line_messages[0], "2: invalid JSON");
  EXPECT_EQ(r.bad_line_messages[1], "5: missing key \"text\"");
  IndexedDataset d(dir + "/out_text_document");
  EXPECT_EQ(d.sequences(), 2);
}

TEST(Preprocess, WorkersDoNotChangeTheOutputAndKeysAreSeparateDatasets) {
  std::string dir = temp_dir("workers");
  std::vector<std::string> lines;
  for (int i = 0; i < 3000; ++i)
    lines.push_back("{\"text\": \"document " + std::to_string(i) + " says hello\", \"title\": \"t" +
                    std::to_string(i % 7) + "\"}");
  std::string input = write_jsonl(dir, lines);
  std::map<int, std::string> bins;
  for (int workers : {1, 3}) {
    PreprocessOptions o = options(input, dir);
    o.workers = workers;
    o.json_keys = {"text", "title"};
    o.output_prefix = dir + "/w" + std::to_string(workers);
    std::ostringstream progress;
    preprocess(o, progress);
    std::ifstream f(o.output_prefix + "_text_document.bin", std::ios::binary);
    bins[workers] =
        std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    IndexedDataset title(o.output_prefix + "_title_document");
    EXPECT_EQ(title.sequences(), 3000);
  }
  EXPECT_EQ(bins[1], bins[3]);
  IndexedDataset text(dir + "/w3_text_document");
  tokenizer::GPT2Tokenizer tok(kVocab, kMerges);
  std::vector<int> doc;
  text.read(1234, 0, text.size(1234), &doc);
  std::vector<int> expect = tok.encode("document 1234 says hello");
  expect.push_back(50256);
  EXPECT_EQ(doc, expect);
}

}  // namespace
}  // namespace trident::data
