// The grid with context parallelism against Megatron-Core's RankGenerator (parallel_state.py,
// default order "tp-cp-ep-dp-pp", ep = 1 for the dense groups): its
// generate_masked_orthogonal_rank_groups, re-implemented below, numbers a rank as a mixed-radix
// number over (tp, cp, dp, pp), tp fastest, and a group of token "dp-cp" varies the masked
// coordinates in order (the first listed in the order fastest), the others fixed.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "distributed/process_grid.h"

namespace trident::distributed {
namespace {

std::vector<int> decompose(int index, const std::vector<int>& shape) {
  std::vector<int> idx;
  for (int s : shape) idx.push_back(index % s), index /= s;
  return idx;
}

// Megatron's generate_masked_orthogonal_rank_groups(world, sizes, mask).
std::vector<std::vector<int>> megatron_groups(int world, const std::vector<int>& sizes,
                                              const std::vector<bool>& mask) {
  std::vector<int> stride(sizes.size()), masked, unmasked, masked_stride, unmasked_stride;
  for (size_t i = 0, s = 1; i < sizes.size(); s *= sizes[i], ++i) stride[i] = (int)s;
  for (size_t i = 0; i < sizes.size(); ++i) {
    (mask[i] ? masked : unmasked).push_back(sizes[i]);
    (mask[i] ? masked_stride : unmasked_stride).push_back(stride[i]);
  }
  int group_size = 1;
  for (int s : masked) group_size *= s;
  std::vector<std::vector<int>> groups;
  for (int g = 0; g < world / group_size; ++g) {
    const std::vector<int> gi = decompose(g, unmasked);
    std::vector<int> ranks;
    for (int r = 0; r < group_size; ++r) {
      const std::vector<int> ri = decompose(r, masked);
      int rank = 0;
      for (size_t k = 0; k < ri.size(); ++k) rank += ri[k] * masked_stride[k];
      for (size_t k = 0; k < gi.size(); ++k) rank += gi[k] * unmasked_stride[k];
      ranks.push_back(rank);
    }
    groups.push_back(ranks);
  }
  return groups;
}

using GroupOf = std::vector<int> (ProcessGrid::*)(int) const;

// Every Megatron group of the masked axes (tp, cp, dp, pp) is, in order, the grid's group of
// each of its ranks.
void expect_groups(const ProcessGrid& g, int t, int c, int d, int p, std::vector<bool> mask,
                   GroupOf group_of, const char* name) {
  for (const std::vector<int>& expected : megatron_groups(g.world(), {t, c, d, p}, mask))
    for (int r : expected) EXPECT_EQ((g.*group_of)(r), expected) << name << " of rank " << r;
}

TEST(ProcessGridContext, GroupsMatchMegatronsRankGenerator) {
  for (auto [world, t, c, p] : {std::tuple{4, 1, 2, 1},
                                {8, 2, 2, 1},
                                {8, 1, 4, 1},
                                {8, 1, 2, 2},
                                {16, 2, 2, 2},
                                {24, 2, 3, 2},
                                {8, 2, 1, 2}}) {
    const ProcessGrid g(world, t, p, 1, 0, c);
    const int d = world / (t * c * p);
    ASSERT_EQ(g.context_size(), c);
    ASSERT_EQ(g.data_size(), d);
    expect_groups(g, t, c, d, p, {true, false, false, false}, &ProcessGrid::tensor_group, "tp");
    expect_groups(g, t, c, d, p, {false, true, false, false}, &ProcessGrid::context_group, "cp");
    expect_groups(g, t, c, d, p, {false, false, true, false}, &ProcessGrid::data_group, "dp");
    expect_groups(g, t, c, d, p, {false, false, false, true}, &ProcessGrid::pipeline_group, "pp");
    expect_groups(g, t, c, d, p, {false, true, true, false}, &ProcessGrid::data_context_group,
                  "dp-cp");
    for (int r = 0; r < world; ++r) {
      const GridCoords x = g.coords(r);
      EXPECT_EQ(r, x.tp + t * (x.cp + c * (x.dp + d * x.pp)));
      EXPECT_EQ(g.rank_of(x), r);
      // Every member of a group shares its colour for MPI_Comm_split, and no other rank does.
      for (int q = 0; q < world; ++q) {
        const std::vector<int> cp = g.context_group(r), dc = g.data_context_group(r);
        EXPECT_EQ(g.context_group_index(q) == g.context_group_index(r),
                  std::find(cp.begin(), cp.end(), q) != cp.end());
        EXPECT_EQ(g.data_context_group_index(q) == g.data_context_group_index(r),
                  std::find(dc.begin(), dc.end(), q) != dc.end());
      }
    }
  }
}

// Megatron's docstring-sized example with cp: 8 ranks, t = 2, c = 2, d = 2.
TEST(ProcessGridContext, EightRankExample) {
  const ProcessGrid g(8, 2, 1, 1, 0, 2);
  EXPECT_EQ(g.context_group(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(g.context_group(5), (std::vector<int>{5, 7}));
  EXPECT_EQ(g.data_group(0), (std::vector<int>{0, 4}));
  EXPECT_EQ(g.data_context_group(1), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(g.tensor_group(6), (std::vector<int>{6, 7}));
  // Without EP the expert groups stay one rank (MoE is refused at c > 1).
  for (int r = 0; r < 8; ++r) EXPECT_EQ(g.expert_group(r), (std::vector<int>{r}));
}

TEST(ProcessGridContext, PrintsTheContextAxis) {
  std::ostringstream with, without;
  ProcessGrid(4, 1, 1, 1, 0, 2).print(with, {});
  ProcessGrid(4, 1, 1).print(without, {});
  EXPECT_NE(with.str().find("tensor 1 x context 2 x data 2 x pipeline 1"), std::string::npos)
      << with.str();
  EXPECT_NE(with.str().find("context groups (2): [0,1] [2,3]"), std::string::npos) << with.str();
  EXPECT_NE(with.str().find("data groups (2): [0,2] [1,3]"), std::string::npos) << with.str();
  EXPECT_NE(with.str().find("data x context groups (1): [0,1,2,3]"), std::string::npos)
      << with.str();
  EXPECT_EQ(without.str().find("context"), std::string::npos) << without.str();
}

// A rank's label in pictures: its coordinates worked by hand from rank = tp + t * (cp + c *
// (dp + d * pp)) at t = 2, c = 2, d = 1, p = 2.
TEST(ProcessGridContext, LabelsRanksByTheirFourCoordinates) {
  const ProcessGrid grid(8, 2, 2, 1, 0, 2);
  EXPECT_EQ(grid.rank_label(0), "rank 0 (t 0, c 0, d 0, p 0)");
  EXPECT_EQ(grid.rank_label(3), "rank 3 (t 1, c 1, d 0, p 0)");  // 3 = 1 + 2 * 1
  EXPECT_EQ(grid.rank_label(6), "rank 6 (t 0, c 1, d 0, p 1)");  // 6 = 0 + 2 * (1 + 2 * 1)
  const std::vector<std::string> labels = grid.rank_labels();
  ASSERT_EQ(labels.size(), 8u);
  EXPECT_EQ(labels[5], "rank 5 (t 1, c 0, d 0, p 1)");  // 5 = 1 + 2 * (0 + 2 * 1)
}

}  // namespace
}  // namespace trident::distributed
