// The rank grid against Megatron's documented example (parallel_state.py docstring:
// 16 ranks, TP = 2, PP = 4, hence DP = 2).
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

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

// Megatron's expert RankGenerator (parallel_state.py, order tp-cp-ep-dp-pp with cp = 1 and
// tensor size ETP) numbers rank = etp + ETP * (ep + EP * (edp + EDP * pp)); its "ep" groups
// vary ep, its "dp" groups (the expert-data-parallel ones) vary edp, every other coordinate
// fixed.
std::vector<int> megatron_expert_rank_group(int etp_size, int ep, int edp, int etp, int e, int x,
                                            int pp, bool vary_ep) {
  std::vector<int> g;
  for (int i = 0; i < (vary_ep ? ep : edp); ++i) {
    const int ei = vary_ep ? i : e, xi = vary_ep ? x : i;
    g.push_back(etp + etp_size * (ei + ep * (xi + edp * pp)));
  }
  return g;
}

// world, t, p, EP, ETP (0: t).
void expect_megatron_expert_groups(int world, int t, int p, int ep, int etp_size) {
  ProcessGrid g(world, t, p, ep, etp_size);
  if (etp_size == 0) etp_size = t;
  const int edp = world / (etp_size * p * ep);
  EXPECT_EQ(g.expert_size(), ep);
  EXPECT_EQ(g.expert_data_size(), edp);
  for (int pp = 0; pp < p; ++pp)
    for (int x = 0; x < edp; ++x)
      for (int e = 0; e < ep; ++e)
        for (int etp = 0; etp < etp_size; ++etp) {
          const int r = etp + etp_size * (e + ep * (x + edp * pp));
          const std::string where = "world " + std::to_string(world) + " t " + std::to_string(t) +
                                    " p " + std::to_string(p) + " ep " + std::to_string(ep) +
                                    " etp " + std::to_string(etp_size) + " rank " +
                                    std::to_string(r);
          EXPECT_EQ(g.expert_rank(r), e) << where;
          EXPECT_EQ(g.expert_data_rank(r), x) << where;
          EXPECT_EQ(g.expert_group(r),
                    megatron_expert_rank_group(etp_size, ep, edp, etp, e, x, pp, true))
              << where;
          EXPECT_EQ(g.expert_data_group(r),
                    megatron_expert_rank_group(etp_size, ep, edp, etp, e, x, pp, false))
              << where;
        }
  // Distinct groups have distinct colours (MPI_Comm_split keeps them apart).
  for (int r = 0; r < world; ++r)
    for (int q = 0; q < world; ++q) {
      const std::vector<int> gr = g.expert_group(r), gd = g.expert_data_group(r);
      const bool same_e = std::find(gr.begin(), gr.end(), q) != gr.end();
      const bool same_d = std::find(gd.begin(), gd.end(), q) != gd.end();
      EXPECT_EQ(same_e, g.expert_group_index(q) == g.expert_group_index(r));
      EXPECT_EQ(same_d, g.expert_data_group_index(q) == g.expert_data_group_index(r));
    }
}

TEST(ProcessGrid, ExpertGroupsFollowMegatronsRankGenerator) {
  for (auto [world, t, p, ep] : {std::tuple{8, 1, 1, 2},
                                 {8, 1, 1, 4},
                                 {8, 1, 2, 2},
                                 {16, 2, 2, 2},
                                 {24, 1, 2, 3},
                                 {8, 1, 1, 1},
                                 {8, 1, 1, 8}})
    expect_megatron_expert_groups(world, t, p, ep, 0);
}

// ETP = 1 < t: the tensor ranks join the expert groups (t = 2, EP = 2: a data-parallel
// rank's two tensor ranks are an expert group; EP = 4, d = 2: the whole stage).
TEST(ProcessGrid, WholeExpertGridsTakeTensorRanks) {
  for (auto [world, t, p, ep] : {std::tuple{2, 2, 1, 2},
                                 {4, 2, 1, 4},
                                 {4, 2, 1, 2},
                                 {8, 2, 2, 2},
                                 {8, 4, 1, 4},
                                 {8, 4, 1, 2}})
    expect_megatron_expert_groups(world, t, p, ep, 1);
  ProcessGrid g(4, 2, 1, 2, 1);  // t 2, d 2, EP 2, ETP 1: EDP 2
  EXPECT_EQ(g.expert_group(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(g.expert_group(3), (std::vector<int>{2, 3}));
  EXPECT_EQ(g.expert_data_group(1), (std::vector<int>{1, 3}));
  EXPECT_EQ(g.expert_tensor_size(), 1);
}

TEST(ProcessGrid, PrintsExpertGroupsOnlyWithExpertParallelism) {
  std::ostringstream with, without;
  ProcessGrid(8, 1, 1, 2).print(with, {});
  ProcessGrid(8, 1, 1).print(without, {});
  EXPECT_NE(with.str().find("expert groups (4): [0,1] [2,3] [4,5] [6,7]"), std::string::npos)
      << with.str();
  EXPECT_NE(with.str().find("expert-data groups (2): [0,2,4,6] [1,3,5,7]"), std::string::npos)
      << with.str();
  EXPECT_EQ(without.str().find("expert"), std::string::npos) << without.str();
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
