// A whole tokenizer.json read from disk: the file or its folder, BOS / EOS from
// tokenizer_config.json (never the ids), the vocabulary size counting added tokens, added
// tokens recognised in text, decode and streamed decode_bytes, and bad files named.
// Parity with HF `tokenizers` on real files: tests/reference/hf_tokenizer_test.py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "test_util.h"
#include "tokenizer/huggingface_tokenizer.h"

namespace trident::tokenizer {
namespace {

namespace fs = std::filesystem;

nlohmann::json small_tokenizer() {
  nlohmann::json vocab = nlohmann::json::object();
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyz";
  for (size_t i = 0; i < alphabet.size(); ++i) vocab[std::string(1, alphabet[i])] = (int)i;
  vocab["\xc4\xa0"] = 26;  // Ġ
  vocab["\xc4\xa0h"] = 27;
  vocab["\xc4\xa0hi"] = 28;
  return {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 29}, {"content", "<eos>"}, {"special", true}, {"normalized", false}},
        {{"id", 30}, {"content", "<bos>"}, {"special", true}, {"normalized", false}}}},
      {"normalizer", {{"type", "Lowercase"}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"\xc4\xa0 h", "\xc4\xa0h i"}}}}};
}

fs::path write_dir(const std::string& name, const nlohmann::json& tok,
                   const nlohmann::json& config) {
  const fs::path dir = testing::process_temp_root() / name;
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tok.dump();
  if (!config.is_null()) std::ofstream(dir / "tokenizer_config.json") << config.dump();
  return dir;
}

TEST(HuggingFaceTokenizer, EncodesDecodesAndReadsTheConfig) {
  const fs::path dir = write_dir("hf_small", small_tokenizer(),
                                 {{"bos_token", "<bos>"}, {"eos_token", {{"content", "<eos>"}}}});
  HuggingFaceTokenizer tok(dir.string());
  EXPECT_EQ(tok.vocab_size(), 31);
  EXPECT_EQ(tok.eod(), 29);
  EXPECT_EQ(tok.bos(), 30);
  // Lowercased, " hi" merged, <eos> in the text is its id.
  EXPECT_EQ(tok.encode("A HI<eos>b"), (std::vector<int>{0, 28, 29, 1}));
  EXPECT_EQ(tok.decode({0, 28, 29, 1}), "a hi<eos>b");
  EXPECT_EQ(tok.decode_bytes({0, 28}) + tok.decode_bytes({29, 1}), "a hi<eos>b");
  HuggingFaceTokenizer by_file((dir / "tokenizer.json").string());
  EXPECT_EQ(by_file.eod(), 29);
  EXPECT_THROW(tok.decode({31}), std::out_of_range);
  EXPECT_THROW(tok.encode("\xff"), std::invalid_argument);
}

TEST(HuggingFaceTokenizer, WithoutAConfigTheUsualEndOfTextIsEod) {
  HuggingFaceTokenizer tok(write_dir("hf_noconfig", small_tokenizer(), nullptr).string());
  EXPECT_EQ(tok.eod(), 29);
  EXPECT_EQ(tok.bos(), -1);
}

std::string load_error(const std::string& name, const nlohmann::json& tok,
                       const nlohmann::json& config = nullptr) {
  try {
    HuggingFaceTokenizer t(write_dir(name, tok, config).string());
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(HuggingFaceTokenizer, BadFilesAreNamed) {
  nlohmann::json tok = small_tokenizer();
  tok["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
  std::string error = load_error("hf_bad_pre", tok);
  EXPECT_NE(error.find("UnicodeScripts"), std::string::npos) << error;
  EXPECT_NE(error.find("tokenizer.json"), std::string::npos) << error;
  error = load_error("hf_bad_eos", small_tokenizer(), {{"eos_token", "<nope>"}});
  EXPECT_NE(error.find("<nope>"), std::string::npos) << error;
  EXPECT_NE(error.find("tokenizer_config.json"), std::string::npos) << error;
  nlohmann::json no_eos = small_tokenizer();
  no_eos["added_tokens"] = nlohmann::json::array();
  EXPECT_NE(load_error("hf_no_eos", no_eos).find("end-of-document"), std::string::npos);
}

// What the fuzz target relies on: a malformed tokenizer.json given as text is FormatError,
// naming the rule broken; a good one reads as from its file.
TEST(HuggingFaceTokenizer, MalformedTextIsAFormatError) {
  auto error_of = [](const std::string& text) -> std::string {
    try {
      HuggingFaceTokenizer::from_json_text(text, "fuzzed.json");
    } catch (const FormatError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of("{not json").find("fuzzed.json: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[1, 2]").find("no \"model\""), std::string::npos);
  nlohmann::json tok = small_tokenizer();
  tok["model"]["vocab"]["z"] = 1 << 24;  // ids index tables and the embedding
  EXPECT_NE(error_of(tok.dump()).find("[0, 16777216)"), std::string::npos) << error_of(tok.dump());
  tok = small_tokenizer();
  tok["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", ""}};  // it would never advance
  EXPECT_NE(error_of(tok.dump()).find("not one character"), std::string::npos);
  tok["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", 3}}}, {"behavior", "Isolated"}};
  EXPECT_NE(error_of(tok.dump()).find("fuzzed.json"), std::string::npos);
  EXPECT_EQ(HuggingFaceTokenizer::from_json_text(small_tokenizer().dump(), "t")->encode("a hi"),
            (std::vector<int>{0, 28}));
}

}  // namespace
}  // namespace trident::tokenizer
