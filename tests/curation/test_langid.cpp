// CLD2 language identification on whole documents and on their spread sample.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "curation/langid.h"

using namespace trident::curation;

TEST(CurationLangid, KnownLanguages) {
  EXPECT_EQ(identify_language("The quick brown fox jumps over the lazy dog, and then it runs "
                              "away into the forest where nobody can find it again.")
                .code,
            "en");
  EXPECT_EQ(identify_language("Der schnelle braune Fuchs springt über den faulen Hund und läuft "
                              "dann in den Wald, wo ihn niemand mehr finden kann.")
                .code,
            "de");
}

TEST(CurationLangid, SpreadSample) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += (i ? (i % 9 ? " w" : "\nw") : "w") + std::to_string(i);
  const std::string s = spread_sample(text, 1024);
  EXPECT_LE(s.size(), 1024u);
  EXPECT_GT(s.size(), 900u);
  // Newline-joined pieces of whole words, the first from the start, the last to the end.
  std::vector<std::string> pieces;
  for (size_t at = 0, end; at <= s.size(); at = end + 1) {
    end = std::min(s.find('\n', at), s.size());
    pieces.push_back(s.substr(at, end - at));
  }
  EXPECT_GE(pieces.size(), 8u);
  EXPECT_EQ(text.rfind(pieces.front(), 0), 0u);
  EXPECT_EQ(text.substr(text.size() - pieces.back().size()), pieces.back());
  auto is_space = [&](size_t i) { return text[i] == ' ' || text[i] == '\n'; };
  for (const std::string& p : pieces) {
    const size_t at = text.find(p);
    ASSERT_NE(at, std::string::npos) << p;
    EXPECT_TRUE(at == 0 || is_space(at - 1)) << p;
    EXPECT_TRUE(at + p.size() == text.size() || is_space(at + p.size())) << p;
  }
  EXPECT_EQ(spread_sample("short text", 1024), "short text");
  // No spaces (CJK): cut at whole UTF-8 characters.
  std::string cjk;
  for (int i = 0; i < 3000; ++i) cjk += "\u65e5\u672c";
  const std::string c = spread_sample(cjk, 1000);
  EXPECT_LE(c.size(), 1000u);
  EXPECT_NE(c.find('\n'), std::string::npos);  // several windows
  std::string joined = c;
  joined.erase(std::remove(joined.begin(), joined.end(), '\n'), joined.end());
  EXPECT_EQ(joined.size() % 3, 0u);
  EXPECT_EQ(joined.find("\u65e5\u672c"), 0u);
}

TEST(CurationLangid, SampleDecidesOnlyFarFromTheThreshold) {
  const LanguageFilter en{{"en"}, 0.5};
  std::string english, german;
  for (int i = 0; i < 60; ++i) {
    english += "The quick brown fox jumps over the lazy dog and runs into the forest. ";
    german += "Der schnelle braune Fuchs springt über den faulen Hund und läuft weg. ";
  }
  EXPECT_TRUE(en.keeps(identify_language(english, en, 1024)));
  EXPECT_FALSE(en.keeps(identify_language(german, en, 1024)));
  // Half and half: the sample is near the threshold, so the whole document decides.
  const std::string mixed = english + german;
  const LanguageGuess whole = identify_language(mixed);
  const LanguageGuess sampled = identify_language(mixed, en, 1024);
  EXPECT_EQ(sampled.code, whole.code);
  EXPECT_EQ(sampled.confidence, whole.confidence);
}
