// The Pareto quality filter: the kept fraction of many draws against the survival formula.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "curation/pareto.h"

using namespace trident::curation;

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
