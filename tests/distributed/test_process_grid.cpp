// The rank grid against Megatron's documented example (parallel_state.py docstring:
// 16 ranks, TP = 2, PP = 4, hence DP = 2).
#include <gtest/gtest.h>

#include <sstream>

#include "distributed/process_grid.h"

namespace trident::distributed {
namespace {

TEST(ProcessGrid, MegatronSixteenRankExample) {
  ProcessGrid g(16, 2, 4);
  EXPECT_EQ(g.data_size(), 2);
  EXPECT_EQ(g.tensor_group(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(g.tensor_group(3), (std::vector<int>{2, 3}));
  EXPECT_EQ(g.data_group(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(g.data_group(5), (std::vector<int>{5, 7}));
  EXPECT_EQ(g.pipeline_group(0), (std::vector<int>{0, 4, 8, 12}));
  EXPECT_EQ(g.pipeline_group(13), (std::vector<int>{1, 5, 9, 13}));
}

TEST(ProcessGrid, CoordinatesRoundTripAndGroupsPartitionTheWorld) {
  for (auto [world, t, p] : {std::tuple{8, 2, 2}, {12, 3, 2}, {6, 1, 3}, {4, 4, 1}}) {
    ProcessGrid g(world, t, p);
    std::vector<int> seen(world, 0);
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(g.rank_of(g.coords(r)), r);
      for (int q : g.tensor_group(r)) EXPECT_EQ(g.tensor_group_index(q), g.tensor_group_index(r));
      for (int q : g.data_group(r)) EXPECT_EQ(g.data_group_index(q), g.data_group_index(r));
      for (int q : g.pipeline_group(r))
        EXPECT_EQ(g.pipeline_group_index(q), g.pipeline_group_index(r));
      if (g.coords(r).tp == 0)
        for (int q : g.tensor_group(r)) ++seen[q];
    }
    for (int n : seen) EXPECT_EQ(n, 1);
  }
}

TEST(ProcessGrid, PrintsGroupsAndWarnsWhenTensorGroupsSpanNodes) {
  ProcessGrid g(4, 2, 1);
  std::ostringstream same, split;
  g.print(same, {"a", "a", "b", "b"});
  g.print(split, {"a", "b", "a", "b"});
  EXPECT_NE(same.str().find("tensor groups (2): [0,1] [2,3]"), std::string::npos) << same.str();
  EXPECT_EQ(same.str().find("warning"), std::string::npos);
  EXPECT_NE(split.str().find("warning: tensor group starting at rank 0 spans nodes"),
            std::string::npos);
}

TEST(ProcessGrid, NamesTheFirstTensorGroupAcrossNodes) {
  ProcessGrid g(8, 2, 2);  // consecutive pairs are tensor groups
  EXPECT_EQ(g.tensor_group_across_nodes({"a", "a", "a", "a", "b", "b", "b", "b"}), "");
  EXPECT_EQ(g.tensor_group_across_nodes({"a", "a", "a", "b", "b", "b", "c", "c"}),
            "tensor group starting at rank 2 spans nodes (rank 2 on a, rank 3 on b)");
  EXPECT_EQ(g.tensor_group_across_nodes({}), "");  // no node names: nothing to check
}

}  // namespace
}  // namespace trident::distributed
