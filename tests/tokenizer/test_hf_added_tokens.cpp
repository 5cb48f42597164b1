// Added tokens found in text as HF does: leftmost-longest, single_word, lstrip / rstrip, the
// normalized set matched after normalization, and ids given as HF's reader gives them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/hf_added_tokens.h"

namespace trident::tokenizer {
namespace {

nlohmann::json token(const std::string& content, nlohmann::json flags = nlohmann::json::object()) {
  nlohmann::json t = {{"id", 0}, {"content", content}, {"normalized", false}};
  t.update(flags);
  return t;
}

// Each segment as its text, an added token's text in <>.
std::vector<std::string> cut(const HfAddedTokens& added, const std::string& text,
                             bool normalized = false) {
  std::vector<HfSegment> segments;
  added.split(text, normalized, &segments);
  std::vector<std::string> out;
  for (const HfSegment& s : segments) {
    const std::string t = text.substr(s.begin, s.end - s.begin);
    out.push_back(s.id >= 0 ? "<" + t + ">" : t);
  }
  return out;
}

using V = std::vector<std::string>;
const TokenIds kVocab = {{"a", 0}, {"b", 1}, {"ab", 2}};

TEST(HfAddedTokens, LeftmostLongestMatch) {
  HfAddedTokens added(nlohmann::json{token("<x>"), token("<x><y>")}, nullptr, kVocab);
  EXPECT_EQ(cut(added, "a<x><y>b<x>"), (V{"a", "<<x><y>>", "b", "<<x>>"}));
}

TEST(HfAddedTokens, SingleWordLstripRstrip) {
  HfAddedTokens word(nlohmann::json{token("the", {{"single_word", true}})}, nullptr, kVocab);
  EXPECT_EQ(cut(word, "the bathe the_x the"), (V{"<the>", " bathe the_x ", "<the>"}));
  HfAddedTokens strip(nlohmann::json{token("[M]", {{"lstrip", true}, {"rstrip", true}})}, nullptr,
                      kVocab);
  EXPECT_EQ(cut(strip, "a  [M]  b"), (V{"a", "<  [M]  >", "b"}));
}

TEST(HfAddedTokens, IdsAsHfAssignsThem) {
  // A content in the vocabulary keeps its id; others follow the vocabulary's size.
  HfAddedTokens added(nlohmann::json{token("ab"), token("<p>"), token("<q>")}, nullptr, kVocab);
  ASSERT_EQ(added.tokens().size(), 3u);
  EXPECT_EQ(added.tokens()[0].id, 2);
  EXPECT_EQ(added.tokens()[1].id, 3);
  EXPECT_EQ(added.tokens()[2].id, 4);
}

TEST(HfAddedTokens, NormalizedTokensMatchTheNormalizedText) {
  auto lower = parse_normalizer({{"type", "Lowercase"}});
  HfAddedTokens added(nlohmann::json{token("Hi", {{"normalized", true}}), token("Yo")}, lower.get(),
                      kVocab);
  EXPECT_EQ(cut(added, "hi Yo", true), (V{"<hi>", " Yo"}));
  EXPECT_EQ(cut(added, "hi Yo", false), (V{"hi ", "<Yo>"}));
  EXPECT_EQ(added.tokens()[0].text, "hi");  // what it decodes to, as HF
}

}  // namespace
}  // namespace trident::tokenizer
