// tokenizer.json patterns through PCRE2: Unicode classes, look-ahead, literal String patterns,
// and a pattern that does not compile named in the error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/hf_regex.h"

namespace trident::tokenizer {
namespace {

std::vector<std::string> matches(const HfRegex& re, const std::string& text) {
  std::vector<std::pair<size_t, size_t>> m;
  re.find_all(text, &m);
  std::vector<std::string> out;
  for (auto [b, e] : m) out.push_back(text.substr(b, e - b));
  return out;
}

using V = std::vector<std::string>;

TEST(HfRegex, UnicodeLettersNumbersAndLookAhead) {
  // GPT-2's pattern: "\s+(?!\S)" leaves the last space to the next word.
  const HfRegex gpt2(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  EXPECT_EQ(matches(gpt2, "héllo  wörld's 42!"), (V{"héllo", " ", " wörld", "'s", " 42", "!"}));
  EXPECT_EQ(matches(gpt2, "日本語 テキスト"), (V{"日本語", " テキスト"}));
}

TEST(HfRegex, CaseInsensitiveGroupAsLlama3Writes) {
  const HfRegex re(R"((?i:'s|'t|'re|'ve|'m|'ll|'d))");
  EXPECT_EQ(matches(re, "IT'S we'VE"), (V{"'S", "'VE"}));
}

TEST(HfRegex, StringPatternsMatchLiterally) {
  EXPECT_EQ(matches(HfRegex::literal("a.b*"), "a.b* axbb a.b*"), (V{"a.b*", "a.b*"}));
}

TEST(HfRegex, PatternThatDoesNotCompileIsNamed) {
  try {
    HfRegex("(unclosed");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("(unclosed"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace trident::tokenizer
