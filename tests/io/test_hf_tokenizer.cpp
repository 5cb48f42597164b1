// The tokenizer files of a HuggingFace GPT-2 directory: vocab.json and merges.txt are the
// source files byte for byte; tokenizer_config.json and special_tokens_map.json carry what
// transformers' GPT2Tokenizer reads (<|endoftext|> as bos, eos and unk; 1024 positions).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/hf_tokenizer.h"
#include "test_util.h"

namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST(HfTokenizer, WritesGpt2sFourFiles) {
  const fs::path root = trident::testing::empty_temp_dir("hf_tokenizer", "gpt2");
  const std::string vocab = "{\"!\": 0, \"\\u0120the\": 262}", merges = "#version: 0.2\nĠ t\n";
  std::ofstream(root / "encoder.json", std::ios::binary) << vocab;
  std::ofstream(root / "vocab.bpe", std::ios::binary) << merges;
  const fs::path out = root / "hf";
  trident::io::save_hf_gpt2_tokenizer(out.string(), (root / "encoder.json").string(),
                                      (root / "vocab.bpe").string(), 1024);
  EXPECT_EQ(read(out / "vocab.json"), vocab);
  EXPECT_EQ(read(out / "merges.txt"), merges);
  const auto config = nlohmann::json::parse(read(out / "tokenizer_config.json"));
  EXPECT_EQ(config["tokenizer_class"], "GPT2Tokenizer");
  EXPECT_EQ(config["model_max_length"], 1024);
  EXPECT_EQ(config["eos_token"], "<|endoftext|>");
  const auto special = nlohmann::json::parse(read(out / "special_tokens_map.json"));
  EXPECT_EQ(special, nlohmann::json::parse(R"({"bos_token": "<|endoftext|>",
      "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>"})"));
}
