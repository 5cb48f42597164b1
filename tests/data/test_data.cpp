// The data pipeline's own invariants: indexed-dataset validation, atomic writes, the GPT
// sampling algorithm's coverage of the token stream, caching, blending bounds, and the
// preprocessing of bad input. (Parity with numpy and the reference tokenizers lives in
// dataset_reference_test.py and tokenizer_parity_test.py.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "data/blended_dataset.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "data/preprocess.h"
#include "tokenizer/gpt2_tokenizer.h"

namespace trident::data {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / "trident_data_tests" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

const std::string kVocab = std::string(TRIDENT_SOURCE_DIR) + "/data/gpt2/encoder.json";
const std::string kMerges = std::string(TRIDENT_SOURCE_DIR) + "/data/gpt2/vocab.bpe";

// Documents of deterministic lengths 1..97 holding their index and position.
std::string write_documents(const std::string& dir, int n) {
  std::string prefix = dir + "/docs";
  IndexedDatasetBuilder b(prefix, TokenDtype::kUint16);
  for (int d = 0; d < n; ++d) {
    std::vector<int> doc(1 + (d * 37) % 97);
    for (size_t i = 0; i < doc.size(); ++i) doc[i] = (d * 100 + (int)i) % 60000;
    b.add_document(doc);
  }
  b.finish();
  return prefix;
}

std::string error_of(const std::string& prefix) {
  try {
    IndexedDataset d(prefix);
  } catch (const DatasetError& e) {
    return e.what();
  }
  return "";
}

TEST(IndexedDataset, RoundTripAndNoTemporaryFiles) {
  std::string dir = temp_dir("roundtrip");
  std::string prefix = write_documents(dir, 10);
  EXPECT_FALSE(fs::exists(prefix + ".bin.tmp"));
  EXPECT_FALSE(fs::exists(prefix + ".idx.tmp"));
  IndexedDataset d(prefix);
  ASSERT_EQ(d.sequences(), 10);
  std::vector<int> out;
  d.read(3, 2, 5, &out);
  EXPECT_EQ(out, (std::vector<int>{302, 303, 304, 305, 306}));
}

TEST(IndexedDataset, UnfinishedBuilderLeavesNothing) {
  std::string dir = temp_dir("unfinished");
  {
    IndexedDatasetBuilder b(dir + "/x", TokenDtype::kUint16);
    std::vector<int> doc = {1, 2, 3};
    b.add_document(doc);
  }
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(IndexedDataset, RejectsCorruptFilesWithTheReason) {
  std::string dir = temp_dir("corrupt");
  std::string good = write_documents(dir, 5);
  auto variant = [&](const std::string& name, auto mutate) {
    std::string p = dir + "/" + name;
    fs::copy_file(good + ".idx", p + ".idx");
    fs::copy_file(good + ".bin", p + ".bin");
    mutate(p);
    return error_of(p);
  };
  auto patch = [](const std::string& path, long offset, const std::string& bytes) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(offset);
    f.write(bytes.data(), (std::streamsize)bytes.size());
  };
  EXPECT_NE(variant("magic", [&](auto p) { patch(p + ".idx", 0, "XX"); }).find("bad magic"),
            std::string::npos);
  EXPECT_NE(variant("version", [&](auto p) { patch(p + ".idx", 9, std::string("\x02", 1)); })
                .find("version 2"),
            std::string::npos);
  EXPECT_NE(variant("dtype", [&](auto p) { patch(p + ".idx", 17, std::string("\x07", 1)); })
                .find("dtype code 7"),
            std::string::npos);
  EXPECT_NE(variant("trunc_idx",
                    [&](auto p) { fs::resize_file(p + ".idx", fs::file_size(p + ".idx") - 8); })
                .find("truncated or corrupt"),
            std::string::npos);
  EXPECT_NE(variant("trunc_bin",
                    [&](auto p) { fs::resize_file(p + ".bin", fs::file_size(p + ".bin") - 2); })
                .find("truncated or mismatched"),
            std::string::npos);
  EXPECT_NE(
      variant("pointer", [&](auto p) { patch(p + ".idx", 34 + 5 * 4 + 8, std::string("\x09", 1)); })
          .find("pointer of sequence 1"),
      std::string::npos);
  EXPECT_NE(
      variant("short", [&](auto p) { fs::resize_file(p + ".idx", 12); }).find("truncated header"),
      std::string::npos);
  EXPECT_NE(error_of(dir + "/missing").find("cannot open"), std::string::npos);
}

// Found by fuzz/fuzz_idx.cpp: an index of no sequences handed memcpy a null pointer (an
// empty vector's data()), undefined even for 0 bytes. Now a clean error for this input,
// and an empty dataset (a preprocess of nothing) reads back.
TEST(IndexedDataset, IndexWithoutSequences) {
  auto u64 = [](std::uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  // magic, version 1, dtype uint8, 0 sequences, 1 document entry: 0xff00004400710000
  const std::string fuzzed = std::string("MMIDIDX\0\0", 9) + u64(1) + std::string(1, '\x01') +
                             u64(0) + u64(1) + std::string("\0\0q\0D\0\0\xff", 8);
  try {
    parse_index(fuzzed, "fuzzed.idx");
    ADD_FAILURE() << "no error";
  } catch (const DatasetError& e) {
    EXPECT_NE(std::string(e.what()).find("fuzzed.idx: document index must start at 0"),
              std::string::npos)
        << e.what();
  }
  std::string prefix = temp_dir("empty") + "/empty";
  IndexedDatasetBuilder(prefix, TokenDtype::kUint16).finish();
  IndexedDataset empty(prefix);
  EXPECT_EQ(empty.sequences(), 0);
  EXPECT_EQ(empty.document_index(), (std::vector<std::int64_t>{0}));
}

TEST(Split, MegatronProportions) {
  auto r = split_ranges(parse_split("969,30,1"), 1000);
  EXPECT_EQ(r[0], (std::pair<long, long>{0, 969}));
  EXPECT_EQ(r[1], (std::pair<long, long>{969, 999}));
  EXPECT_EQ(r[2], (std::pair<long, long>{999, 1000}));
  auto two = split_ranges(parse_split("98,2"), 7);  // rounding leaves the total exact
  EXPECT_EQ(two[2].second, 7);
  EXPECT_THROW(parse_split("a,b"), std::invalid_argument);
  EXPECT_THROW(parse_split("0,0,0"), std::invalid_argument);
  EXPECT_THROW(parse_split("1,2,3,4"), std::invalid_argument);
}

TEST(GPTDataset, SamplesTileTheShuffledDocumentStream) {
  std::string dir = temp_dir("tile");
  auto data = std::make_shared<const IndexedDataset>(write_documents(dir, 30));
  GPTDatasetSpec spec{"train", 5, 25, 200, 16, 99, dir + "/cache"};
  GPTDataset ds(data, spec, nullptr);
  // Megatron shuffles all epochs' entries together: every document appears once per epoch.
  long split_docs = 20, epochs = (long)ds.document_index().size() / split_docs;
  ASSERT_EQ((long)ds.document_index().size(), epochs * split_docs);
  ASSERT_GE(epochs, 2);
  std::map<int, long> count;
  for (int d : ds.document_index()) ++count[d];
  ASSERT_EQ((long)count.size(), split_docs);
  for (const auto& [doc, n] : count) {
    EXPECT_GE(doc, 5);
    EXPECT_LT(doc, 25);
    EXPECT_EQ(n, epochs);
  }
  // Samples in sample-index order, overlapping by their extra token, are the stream.
  std::vector<int> stream;
  for (int d : ds.document_index()) data->read(d, 0, data->size(d), &stream);
  long n = (long)ds.shuffle_index().size();
  ASSERT_GE(n, 200);
  std::vector<long> position(n);
  for (long i = 0; i < n; ++i) position[ds.shuffle_index()[i]] = i;  // invert the shuffle
  std::vector<int> sample(17);
  for (long s = 0; s < n; ++s) {
    ds.sample(position[s], sample.data());
    for (int t = 0; t < 17; ++t) ASSERT_EQ(sample[t], stream[s * 16 + t]) << "sample " << s;
  }
  std::vector<long> sorted(ds.shuffle_index().begin(), ds.shuffle_index().end());
  std::sort(sorted.begin(), sorted.end());
  for (long i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i);
}

TEST(GPTDataset, SeedDeterminesOrderAndCacheIsKeyedAndRefreshed) {
  std::string dir = temp_dir("cache");
  std::string prefix = write_documents(dir, 30);
  auto data = std::make_shared<const IndexedDataset>(prefix);
  GPTDatasetSpec spec{"train", 0, 30, 50, 16, 7, dir + "/cache"};
  GPTDataset a(data, spec, nullptr);
  EXPECT_FALSE(a.loaded_from_cache());
  GPTDataset b(data, spec, nullptr);
  EXPECT_TRUE(b.loaded_from_cache());
  EXPECT_EQ(a.shuffle_index(), b.shuffle_index());
  spec.seed = 8;
  GPTDataset c(data, spec, nullptr);
  EXPECT_FALSE(c.loaded_from_cache());
  EXPECT_NE(a.shuffle_index(), c.shuffle_index());
  // Rewriting the data makes the cache stale: it is rebuilt, not reused.
  spec.seed = 7;
  write_documents(dir, 31);
  auto fresh = std::make_shared<const IndexedDataset>(prefix);
  GPTDataset d(fresh, spec, nullptr);
  EXPECT_FALSE(d.loaded_from_cache());
}

TEST(Blending, EveryPrefixWithinOneSampleOfItsWeight) {
  std::vector<double> weights = {0.3, 0.5, 0.2, 1e-3};
  std::vector<std::int16_t> which;
  std::vector<std::int64_t> index;
  build_blending_indices(weights, 20000, &which, &index);
  std::vector<long> taken(weights.size(), 0);
  double total = 0;
  for (double w : weights) total += w;
  for (long i = 0; i < 20000; ++i) {
    ASSERT_EQ(index[i], taken[which[i]]);
    ++taken[which[i]];
    for (size_t d = 0; d < weights.size(); ++d)
      ASSERT_LE(std::abs(taken[d] - weights[d] / total * (i + 1)), 1.0) << "prefix " << i + 1;
  }
}

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

TEST(Tokenizer, KnownIdsAndByteMap) {
  tokenizer::GPT2Tokenizer tok(kVocab, kMerges);
  EXPECT_EQ(tok.vocab_size(), 50257);
  EXPECT_EQ(tok.encode("Hello world"), (std::vector<int>{15496, 995}));
  EXPECT_EQ(tokenizer::byte_to_unicode(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(tokenizer::byte_to_unicode('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(tokenizer::byte_to_unicode('A'), (char32_t)'A');
  EXPECT_EQ(tok.decode({15496, 995}), "Hello world");
  // A token boundary inside a character decodes with U+FFFD, like the reference decoders.
  std::vector<int> emoji = tok.encode("😀");
  ASSERT_GT(emoji.size(), 1u);
  EXPECT_EQ(tok.decode({emoji[0]}), "\xef\xbf\xbd");
}

// A tokenizer built where a destroyed one lived, from other files, must not see the old
// one's per-thread BPE cache (it was keyed by the address).
TEST(Tokenizer, ANewTokenizerAtAnOldAddressDoesNotReuseItsCache) {
  std::string dir = temp_dir("swapped_vocab");
  nlohmann::json vocab = nlohmann::json::parse(std::ifstream(kVocab));
  std::swap(vocab["Hello"], vocab["Ġworld"]);  // the same merges, two ids exchanged
  std::ofstream(dir + "/swapped.json") << vocab.dump();
  std::optional<tokenizer::GPT2Tokenizer> tok;
  tok.emplace(kVocab, kMerges);
  const void* address = &*tok;
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int>{15496, 995}));
  tok.emplace(dir + "/swapped.json", kMerges);
  ASSERT_EQ(address, (const void*)&*tok);
  EXPECT_EQ(tok->encode("Hello world"), (std::vector<int>{995, 15496}));
}

TEST(Tokenizer, BadVocabularyFilesAreNamed) {
  std::string dir = temp_dir("bad_vocab");
  std::ofstream(dir + "/v.json") << "{\"a\": 0";
  try {
    tokenizer::GPT2Tokenizer tok(dir + "/v.json", kMerges);
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/v.json: not valid JSON"), std::string::npos);
  }
  try {
    tokenizer::GPT2Tokenizer tok(kVocab, dir + "/missing.bpe");
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.bpe: cannot open"), std::string::npos);
  }
}

}  // namespace
}  // namespace trident::data
