// Decontamination: a benchmark n-gram is cut out with its context; too many cuts drop the
// document.
#include <gtest/gtest.h>

#include <string>

#include "curation/decontaminate.h"

using namespace trident::curation;

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
