// Unit tests of src/curation/: each piece against a value worked out by hand or a direct count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "curation/decontaminate.h"
#include "curation/document.h"
#include "curation/exact_dedup.h"
#include "curation/langid.h"
#include "curation/lsh.h"
#include "curation/minhash.h"
#include "curation/normalize.h"
#include "curation/pareto.h"
#include "curation/union_find.h"

using namespace trident::curation;

TEST(CurationNormalize, NfcControlsAndWhitespace) {
  EXPECT_EQ(normalize_text("cafe\u0301"), "caf\u00e9");
  EXPECT_EQ(normalize_text("  a\t\tb \u00a0 c  \r\nd\x01\x7f e\n\n\n\nf  "), "a b c\nd e\n\nf");
  EXPECT_EQ(normalize_text("\xef\xbb\xbfx\xc2\x85y"), "xy");  // BOM and C1 NEL removed
  EXPECT_EQ(count_chars("caf\u00e9"), 4);
}

TEST(CurationDocument, ParsesAndRejects) {
  ParsedLine p;
  EXPECT_EQ(parse_curate_line(R"({"text":"hi","id":7,"x":[1]})", "text", "id", &p), "");
  EXPECT_EQ(p.text, "hi");
  EXPECT_EQ(p.id, "7");
  EXPECT_EQ(p.object["x"][0], 1);
  EXPECT_EQ(parse_curate_line("{", "text", "id", &p), "invalid JSON");
  EXPECT_EQ(parse_curate_line("[1]", "text", "id", &p), "not a JSON object");
  EXPECT_EQ(parse_curate_line(R"({"id":1})", "text", "id", &p), "missing key \"text\"");
  EXPECT_EQ(parse_curate_line(R"({"text":1})", "text", "id", &p), "key \"text\" is not a string");
  EXPECT_EQ(parse_curate_line("{\"text\":\"\xff\"}", "text", "id", &p).rfind("invalid UTF-8", 0),
            0u);
}

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

TEST(CurationPareto, SurvivalMatchesFormula) {
  const double alpha = 3, score = 0.6;
  int kept = 0, n = 200000;
  for (int i = 0; i < n; ++i)
    kept += pareto_keep(score, pareto_draw(42, "doc" + std::to_string(i), alpha));
  const double p = pareto_keep_probability(score, alpha);
  EXPECT_NEAR(p, std::pow(1.4, -3), 1e-12);
  EXPECT_NEAR((double)kept / n, p, 4 * std::sqrt(p * (1 - p) / n));
  EXPECT_EQ(pareto_draw(1, "x", 3), pareto_draw(1, "x", 3));
}

TEST(CurationMinhash, EstimatesJaccard) {
  std::string a, b;
  for (int i = 0; i < 400; ++i) {
    a += "w" + std::to_string(i) + " ";
    b += (i % 10 == 0 ? "z" : "w") + std::to_string(i) + " ";
  }
  const double j = jaccard(shingle_hashes(a, 5), shingle_hashes(b, 5));
  MinHasher h(256, 1);
  std::vector<std::uint32_t> sa(256), sb(256);
  h.signature(a, 5, sa.data());
  h.signature(b, 5, sb.data());
  int same = 0;
  for (int i = 0; i < 256; ++i) same += sa[i] == sb[i];
  EXPECT_NEAR(same / 256.0, j, 4 * std::sqrt(j * (1 - j) / 256));
  EXPECT_EQ(jaccard(shingle_hashes("a b c", 5), shingle_hashes("a b c", 5)), 1.0);
}

TEST(CurationLsh, ParamsAndCandidates) {
  LshParams p = choose_lsh_params(0.7, 128);
  EXPECT_EQ(p.bands, 20);  // recall-weighted: P = 0.98 at 0.75, 0.27 at 0.5
  EXPECT_EQ(p.rows, 6);
  EXPECT_NEAR(lsh_probability(0.75, p), 1 - std::pow(1 - std::pow(0.75, 6), 20), 1e-12);
  EXPECT_GT(lsh_probability(0.75, p), 0.97);
  EXPECT_LT(lsh_probability(0.5, p), 0.3);
  // Documents 0 and 2 share band 1; 1 shares nothing.
  std::vector<std::uint64_t> h = {1, 2, 3, 4, 5, 2};
  auto pairs = candidate_pairs(h, 3, 2, 64);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0], std::make_pair(0u, 2u));
}

TEST(CurationUnionFind, Components) {
  UnionFind uf(5);
  uf.unite(0, 1);
  uf.unite(3, 1);
  EXPECT_EQ(uf.find(0), uf.find(3));
  EXPECT_NE(uf.find(0), uf.find(2));
  EXPECT_EQ(uf.size_of(3), 3u);
}

TEST(CurationExact, FirstOccurrenceKept) {
  std::vector<HashedDoc> d = {exact_hash("a", 5), exact_hash("b", 1), exact_hash("a", 2)};
  auto k = exact_keepers(d);
  EXPECT_EQ(k, (std::vector<std::uint32_t>{2, 1, 2}));
}

TEST(CurationDecontaminate, CutsWithContext) {
  NgramIndex index(3);
  index.add_text("Alpha, BETA gamma!");
  std::string filler(300, 'x');
  std::string doc = filler + " alpha beta gamma " + filler;
  Decontaminated d = decontaminate(doc, index, {10, 50, 10});
  ASSERT_TRUE(d.matched);
  ASSERT_EQ(d.pieces.size(), 2u);
  EXPECT_EQ(d.pieces[0], filler.substr(0, 291));  // 300 + space, minus 10 before the match
  EXPECT_EQ(d.pieces[1].size(), 291u);
  EXPECT_EQ(d.matches[0], "alpha beta gamma");
  // Too many pieces: the whole document goes.
  std::string many;
  for (int i = 0; i < 12; ++i) many += filler + " alpha beta gamma ";
  EXPECT_TRUE(decontaminate(many, index, {10, 50, 10}).dropped);
  EXPECT_FALSE(decontaminate(filler, index, {10, 50, 10}).matched);
}
