// The BPE model of a tokenizer.json on vocabularies small enough to merge by hand: merges by
// rank then position, both merge spellings, ignore_merges, byte_fallback, unk_token and
// fuse_unk, pieces too long to cache, and the errors that name the bad entry.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/hf_bpe.h"

namespace trident::tokenizer {
namespace {

nlohmann::json model(nlohmann::json merges, nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json m = {{"type", "BPE"},
                      {"vocab",
                       {{"a", 0},
                        {"b", 1},
                        {"c", 2},
                        {"ab", 3},
                        {"bc", 4},
                        {"abc", 5},
                        {"<unk>", 6},
                        {"<0x7A>", 7},
                        {"cc", 8}}},
                      {"merges", merges}};
  m.update(extra);
  return m;
}

std::vector<int> ids(const HfBpe& bpe, const std::string& piece) {
  std::vector<int> out;
  bpe.tokenize(piece, &out);
  return out;
}

TEST(HfBpe, LowestRankFirstThenLeftmost) {
  // "b c" ranks before "a b": abc -> a bc (and "a bc" is no merge); with "a b" first -> abc.
  EXPECT_EQ(ids(HfBpe(model({"b c", "a b", "ab c"})), "abc"), (std::vector<int>{0, 4}));
  EXPECT_EQ(ids(HfBpe(model({"a b", "b c", "ab c"})), "abc"), (std::vector<int>{5}));
  // One rank, two places: the leftmost pair merges first, "ccc" -> cc c.
  EXPECT_EQ(ids(HfBpe(model({"c c"})), "ccc"), (std::vector<int>{8, 2}));
}

TEST(HfBpe, MergesAsPairsEqualMergesAsStrings) {
  HfBpe strings(model({"a b", "ab c"})),
      pairs(model(nlohmann::json::array(
          {nlohmann::json::array({"a", "b"}), nlohmann::json::array({"ab", "c"})})));
  EXPECT_EQ(ids(strings, "abcab"), ids(pairs, "abcab"));
  EXPECT_EQ(ids(pairs, "abcab"), (std::vector<int>{5, 3}));
}

TEST(HfBpe, IgnoreMergesTakesAWholeWordInTheVocabulary) {
  // No merge makes "bc" from b + c here, yet with ignore_merges the piece "bc" is one token.
  EXPECT_EQ(ids(HfBpe(model({"a b"})), "bc"), (std::vector<int>{1, 2}));
  EXPECT_EQ(ids(HfBpe(model({"a b"}, {{"ignore_merges", true}})), "bc"), (std::vector<int>{4}));
}

TEST(HfBpe, UnknownCharactersByteFallbackUnkOrDropped) {
  // "z" is not in the vocabulary; <0x7A> is its byte token.
  EXPECT_EQ(ids(HfBpe(model({}, {{"byte_fallback", true}})), "aza"), (std::vector<int>{0, 7, 0}));
  EXPECT_EQ(ids(HfBpe(model({}, {{"unk_token", "<unk>"}})), "azya"),
            (std::vector<int>{0, 6, 6, 0}));
  EXPECT_EQ(ids(HfBpe(model({}, {{"unk_token", "<unk>"}, {"fuse_unk", true}})), "azya"),
            (std::vector<int>{0, 6, 0}));
  EXPECT_EQ(ids(HfBpe(model({})), "azya"), (std::vector<int>{0, 0}));
}

TEST(HfBpe, PiecesTooLongForTheCacheMergeAsShortOnesDo) {
  // 300 and 3000 bytes (past PieceCache's 256) then 3 bytes: each "abc" becomes one token, the
  // second time too, and a long piece between short ones does not disturb their cached ids.
  HfBpe bpe(model({"a b", "ab c"}));
  for (int round = 0; round < 2; ++round) {
    for (int copies : {100, 1000, 1}) {
      std::string piece;
      for (int i = 0; i < copies; ++i) piece += "abc";
      EXPECT_EQ(ids(bpe, piece), std::vector<int>(copies, 5)) << copies << " copies";
    }
    EXPECT_EQ(ids(bpe, std::string(301, 'c')), (std::vector<int>(301, 2)));
  }
}

TEST(HfBpe, BadEntriesAreNamed) {
  auto error = [](const nlohmann::json& m) {
    try {
      HfBpe bpe(m);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error(model({"a q"})).find("a q"), std::string::npos);
  EXPECT_NE(error(model({}, {{"unk_token", "<missing>"}})).find("<missing>"), std::string::npos);
  EXPECT_NE(error(model({}, {{"type", "Unigram"}})).find("Unigram"), std::string::npos);
  EXPECT_NE(error(model({}, {{"dropout", 0.1}})).find("dropout"), std::string::npos);
}

}  // namespace
}  // namespace trident::tokenizer
