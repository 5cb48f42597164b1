// Unit tests of src/curation/: each piece against a value worked out by hand or a direct count.
#include <gtest/gtest.h>

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
