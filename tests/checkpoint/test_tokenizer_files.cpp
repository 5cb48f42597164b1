// A checkpoint's tokenizer files: copied byte for byte under HF's names, listed with size
// and xxh64 (the published test vectors of XXH64 with seed 0), read back from wherever the
// checkpoint now is, and a changed copy refused naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint/manifest.h"
#include "checkpoint/tokenizer_files.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace trident::checkpoint;
using trident::testing::empty_temp_dir;

namespace {

void write(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST(TokenizerFiles, Xxh64MatchesThePublishedVectors) {
  EXPECT_EQ(xxh64_hex(""), "ef46db3751d8e999");
  EXPECT_EQ(xxh64_hex("abc"), "44bc2cf5ad770999");
}

TEST(TokenizerFiles, RecordsGpt2AndSentencePieceUnderHfNames) {
  trident::tokenizer::TokenizerOptions gpt2;
  gpt2.vocab_file = "a/encoder.json";
  gpt2.merge_file = "a/vocab.bpe";
  TokenizerRecord r = tokenizer_record(gpt2);
  ASSERT_EQ(r.files.size(), 2u);
  EXPECT_EQ(r.files[0].name, "vocab.json");
  EXPECT_EQ(r.files[1].name, "merges.txt");
  trident::tokenizer::TokenizerOptions sp;
  sp.tokenizer_type = trident::tokenizer::kSentencePieceTokenizer;
  sp.tokenizer_model = "m.model";
  r = tokenizer_record(sp);
  ASSERT_EQ(r.files.size(), 1u);
  EXPECT_EQ(r.files[0].name, "tokenizer.model");
  EXPECT_TRUE(tokenizer_record(trident::tokenizer::TokenizerOptions{}).empty());
}

TEST(TokenizerFiles, RecordsHuggingFaceTokenizerJsonAndItsConfig) {
  const fs::path root = empty_temp_dir("tokenizer_files", "hf");
  write(root / "tokenizer.json", "{}");
  trident::tokenizer::TokenizerOptions hf;
  hf.tokenizer_type = trident::tokenizer::kHuggingFaceTokenizer;
  hf.tokenizer_model = root.string();  // the folder: its tokenizer.json, no config yet
  TokenizerRecord r = tokenizer_record(hf);
  ASSERT_EQ(r.files.size(), 1u);
  EXPECT_EQ(r.files[0].path, (root / "tokenizer.json").string());
  write(root / "tokenizer_config.json", "{\"eos_token\": \"x\"}");
  hf.tokenizer_model = (root / "tokenizer.json").string();
  r = tokenizer_record(hf);
  ASSERT_EQ(r.files.size(), 2u);
  EXPECT_EQ(r.files[0].name, "tokenizer.json");
  EXPECT_EQ(r.files[1].name, "tokenizer_config.json");
  // Read back, --tokenizer-model names the copied tokenizer.json (its config beside it).
  nlohmann::ordered_json manifest;
  manifest["tokenizer"] = save_tokenizer_files(r, (root / "ckpt").string());
  const auto options = tokenizer_options(read_tokenizer_files(manifest, (root / "ckpt").string()));
  EXPECT_EQ(options.tokenizer_type, "HuggingFaceTokenizer");
  EXPECT_EQ(options.tokenizer_model, (root / "ckpt" / "tokenizer" / "tokenizer.json").string());
  EXPECT_EQ(read(root / "ckpt" / "tokenizer" / "tokenizer_config.json"), "{\"eos_token\": \"x\"}");
}

TEST(TokenizerFiles, CopiesListsAndReadsBackAfterAMove) {
  const fs::path root = empty_temp_dir("tokenizer_files", "move");
  fs::create_directories(root / "source");
  fs::create_directories(root / "ckpt");
  write(root / "source" / "encoder.json", "{\"a\": 0}");
  write(root / "source" / "vocab.bpe", "abc");
  trident::tokenizer::TokenizerOptions o;
  o.vocab_file = (root / "source" / "encoder.json").string();
  o.merge_file = (root / "source" / "vocab.bpe").string();
  nlohmann::ordered_json manifest;
  manifest["tokenizer"] = save_tokenizer_files(tokenizer_record(o), (root / "ckpt").string());
  EXPECT_EQ(manifest["tokenizer"]["type"], "GPT2BPETokenizer");
  EXPECT_EQ(manifest["tokenizer"]["files"][1]["bytes"], 3);
  EXPECT_EQ(manifest["tokenizer"]["files"][1]["xxh64"], "44bc2cf5ad770999");
  fs::remove_all(root / "source");
  fs::rename(root / "ckpt", root / "moved");
  const TokenizerRecord back = read_tokenizer_files(manifest, (root / "moved").string());
  const trident::tokenizer::TokenizerOptions options = tokenizer_options(back);
  EXPECT_EQ(options.vocab_file, (root / "moved" / "tokenizer" / "vocab.json").string());
  EXPECT_EQ(read(options.vocab_file), "{\"a\": 0}");
  EXPECT_EQ(read(options.merge_file), "abc");
  EXPECT_TRUE(read_tokenizer_files(nlohmann::ordered_json::object(), "x").empty());
}

TEST(TokenizerFiles, RefusesACopyThatDiffersFromTheManifest) {
  const fs::path root = empty_temp_dir("tokenizer_files", "changed");
  write(root / "merges", "abc");
  TokenizerRecord record{"GPT2BPETokenizer",
                         {{"--merge-file", (root / "merges").string(), "merges.txt"}}};
  nlohmann::ordered_json manifest;
  manifest["tokenizer"] = save_tokenizer_files(record, (root / "ckpt").string());
  write(root / "ckpt" / "tokenizer" / "merges.txt", "abd");
  try {
    read_tokenizer_files(manifest, (root / "ckpt").string());
    FAIL() << "a changed tokenizer file was accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("merges.txt"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("44bc2cf5ad770999"), std::string::npos) << e.what();
  }
  manifest["tokenizer"]["files"][0]["file"] = "../escape";
  EXPECT_THROW(read_tokenizer_files(manifest, (root / "ckpt").string()), CheckpointError);
}
