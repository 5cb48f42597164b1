// Union-find: components and their sizes.
#include <gtest/gtest.h>

#include "curation/union_find.h"

using namespace trident::curation;

TEST(CurationUnionFind, Components) {
  UnionFind uf(5);
  uf.unite(0, 1);
  uf.unite(3, 1);
  EXPECT_EQ(uf.find(0), uf.find(3));
  EXPECT_NE(uf.find(0), uf.find(2));
  EXPECT_EQ(uf.size_of(3), 3u);
}
