// The GPT-2 byte-level BPE tokenizer: known ids and the byte map, its per-thread cache, and
// bad vocabulary files. (Parity with the npm and Python encoders lives in
// tokenizer_parity_test.py.)
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"
#include "tokenizer/gpt2_tokenizer.h"

namespace trident {
namespace {

std::string temp_dir(const std::string& name) {
  return testing::empty_temp_dir("trident_tokenizer_tests", name);
}

const std::string kVocab = std::string(TRIDENT_SOURCE_DIR) + "/data/gpt2/encoder.json";

const std::string kMerges = std::string(TRIDENT_SOURCE_DIR) + "/data/gpt2/vocab.bpe";

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
}  // namespace trident
