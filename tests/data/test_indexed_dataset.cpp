// The indexed dataset (.bin/.idx): a round trip, atomic writes, and every kind of damaged file
// refused with its reason. (Parity with numpy lives in dataset_reference_test.py.)
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/data_test_util.h"
#include "data/indexed_dataset.h"

namespace trident::data {
namespace {

namespace fs = std::filesystem;
using namespace data_test;

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

}  // namespace
}  // namespace trident::data
