// Edit distances worked by hand (insert, delete, substitute, swap of neighbours: one each)
// and the did-you-mean choice built on them.
#include <gtest/gtest.h>

#include "cli/suggest.h"

using trident::cli::edit_distance;
using trident::cli::nearest_name;

TEST(EditDistance, CountsEachKindOfEditAsOne) {
  EXPECT_EQ(edit_distance("", ""), 0);
  EXPECT_EQ(edit_distance("", "abc"), 3);  // three insertions
  EXPECT_EQ(edit_distance("train", "train"), 0);
  EXPECT_EQ(edit_distance("trian", "train"), 1);                 // one swap of neighbours
  EXPECT_EQ(edit_distance("--hiden-size", "--hidden-size"), 1);  // one insertion
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3);              // k->s, e->i, +g
  EXPECT_EQ(edit_distance("flaw", "lawn"), 2);                   // -f, +n
  // Optimal string alignment: a swapped pair is not edited again, so "ca" -> "abc" is 3.
  EXPECT_EQ(edit_distance("ca", "abc"), 3);
}

TEST(NearestName, SuggestsTheClosestWithinAThirdOfTheWord) {
  const std::vector<std::string> flags = {"--hidden-size", "--hidden-dropout", "--lr", "--min-lr"};
  EXPECT_EQ(nearest_name("--hiden-size", flags), "--hidden-size");
  EXPECT_EQ(nearest_name("--hidden-dropot", flags), "--hidden-dropout");
  EXPECT_EQ(nearest_name("--lt", flags), "--lr");         // "lt": 2 letters, 1 edit allowed
  EXPECT_EQ(nearest_name("--learning-rate", flags), "");  // nothing near
  EXPECT_EQ(nearest_name("trian", {"train", "generate", "serve"}), "train");
  EXPECT_EQ(nearest_name("xyz", {"train", "generate", "serve"}), "");
}
