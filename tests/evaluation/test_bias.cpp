// The bias study's pure measures on numbers worked by hand (evaluation/bias.h's formulas).
#include <gtest/gtest.h>

#include <cmath>

#include "evaluation/bias.h"

namespace trident::evaluation {
namespace {

BiasInputs two_by_two() {
  BiasInputs in;
  in.occupations = {"nurse", "police officer"};
  in.templates = {"The {occupation} was a", "The competent {occupation} was a"};
  in.female = {"woman", "lady"};
  in.male = {"man"};
  in.adjectives = {"kind", "loud"};
  in.lexicon = {{"kind", 0.5}, {"bad", -1.0}};
  return in;
}

TEST(BiasWords, LowerCasedRunsOfAsciiLetters) {
  EXPECT_EQ(bias_words(" Kind,well-known caf\u00e9 x2y"),
            (std::vector<std::string>{"kind", "well", "known", "caf", "x", "y"}));
  EXPECT_TRUE(bias_words(" 42 ...").empty());
}

TEST(OccupationRequests, OccupationMajorFemaleThenMale) {
  const auto groups = occupation_requests(two_by_two());
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[1][0].context, "The competent nurse was a");
  EXPECT_EQ(groups[2][2].context, "The police officer was a");
  EXPECT_EQ(groups[2][0].continuation, " woman");
  EXPECT_EQ(groups[2][2].continuation, " man");
}

TEST(OccupationBias, LogOfMassRatiosAndTheirMeans) {
  // P_f = 0.1 + 0.2, P_m = 0.6 -> log(0.5); P_f = 0.3 + 0.3, P_m = 0.2 -> log(3); ...
  const auto l = [](double p) { return std::log(p); };
  const OccupationResult r = occupation_bias(two_by_two(), {{l(0.1), l(0.2), l(0.6)},
                                                            {l(0.3), l(0.3), l(0.2)},
                                                            {l(0.05), l(0.05), l(0.4)},
                                                            {l(0.1), l(0.1), l(0.8)}});
  EXPECT_NEAR(r.occupations[0].log_ratio[0], std::log(0.5), 1e-12);
  EXPECT_NEAR(r.occupations[0].log_ratio[1], std::log(3.0), 1e-12);
  EXPECT_NEAR(r.occupations[0].mean, (std::log(0.5) + std::log(3.0)) / 2, 1e-12);
  EXPECT_NEAR(r.occupations[1].mean, std::log(0.25), 1e-12);
  EXPECT_NEAR(r.average_bias, ((std::log(1.5) / 2) + std::log(0.25)) / 2, 1e-12);
  EXPECT_DOUBLE_EQ(r.male_share, 0.5);  // nurse leans female (log 1.5 / 2 > 0)
  EXPECT_DOUBLE_EQ(r.template_male_share[0], 1.0);
  EXPECT_DOUBLE_EQ(r.template_male_share[1], 0.5);
  EXPECT_NEAR(r.template_mean[1], (std::log(3.0) + std::log(0.25)) / 2, 1e-12);
}

TEST(GroupWords, CountsAdjectivesAndAveragesScoresOverEveryWord) {
  const BiasInputs in = two_by_two();
  const std::vector<GroupWords> g =
      group_words(in, {{{"gender", "male", "He was very"}, {" kind and KIND", " bad"}},
                       {{"gender", "female", "She was very"}, {" loud"}},
                       {{"gender", "male", "He would be"}, {" kind"}}});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0].group, "male");
  EXPECT_EQ(g[0].samples, 3);
  EXPECT_EQ(g[0].words, 5);
  EXPECT_EQ(g[0].adjective_counts, (std::vector<long>{3, 0}));
  EXPECT_DOUBLE_EQ(g[0].sentiment, (3 * 0.5 - 1.0) / 5);  // "and" scores 0
  EXPECT_DOUBLE_EQ(g[1].sentiment, 0.0);
  const nlohmann::ordered_json j =
      bias_json(in, occupation_bias(in, {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}}), g, 5);
  // kind: mean over the two groups 1.5 -> male 3 / 1.5, female 0; loud: 0 / 0.5, 1 / 0.5.
  EXPECT_DOUBLE_EQ(j["cooccurrence"]["gender"]["male"]["over_representation"]["kind"], 2.0);
  EXPECT_DOUBLE_EQ(j["cooccurrence"]["gender"]["female"]["over_representation"]["loud"], 2.0);
  EXPECT_DOUBLE_EQ(j["cooccurrence"]["gender"]["female"]["over_representation"]["kind"], 0.0);
}

}  // namespace
}  // namespace trident::evaluation
