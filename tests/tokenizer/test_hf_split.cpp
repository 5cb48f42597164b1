// HF's SplitDelimiterBehavior on the example of HF's own documentation, "the-final--countdown"
// cut at "-": each behaviour's pieces as the documentation lists them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/hf_regex.h"
#include "tokenizer/hf_split.h"

namespace trident::tokenizer {
namespace {

std::vector<std::string> pieces(const std::string& text, const std::string& pattern,
                                SplitBehavior behavior, bool invert = false) {
  std::vector<std::pair<size_t, size_t>> matches;
  HfRegex(pattern).find_all(text, &matches);
  std::vector<std::string> out;
  for (auto [b, e] :
       apply_split_behavior(spans_from_matches(text.size(), matches, invert), behavior))
    out.push_back(text.substr(b, e - b));
  return out;
}

using V = std::vector<std::string>;

TEST(HfSplit, EachBehaviourAsHfDocumentsIt) {
  const std::string text = "the-final--countdown";
  EXPECT_EQ(pieces(text, "-", SplitBehavior::kRemoved), (V{"the", "final", "countdown"}));
  EXPECT_EQ(pieces(text, "-", SplitBehavior::kIsolated),
            (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(pieces(text, "-", SplitBehavior::kMergedWithPrevious),
            (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(pieces(text, "-", SplitBehavior::kMergedWithNext),
            (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(pieces(text, "-", SplitBehavior::kContiguous),
            (V{"the", "-", "final", "--", "countdown"}));
}

TEST(HfSplit, InvertKeepsWhatTheBehaviourWouldRemove) {
  EXPECT_EQ(pieces("the-final--countdown", "-", SplitBehavior::kRemoved, true), (V{"-", "-", "-"}));
}

TEST(HfSplit, EmptyLookAheadMatchesCutTheText) {
  // Oniguruma's find_iter reports an empty match once per position: "LORD" cut before capitals.
  EXPECT_EQ(pieces("the LORD", "(?=\\p{Lu})", SplitBehavior::kIsolated),
            (V{"the ", "L", "O", "R", "D"}));
}

TEST(HfSplit, UnknownBehaviourIsNamed) {
  try {
    parse_split_behavior("Sideways");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("Sideways"), std::string::npos);
  }
}

}  // namespace
}  // namespace trident::tokenizer
