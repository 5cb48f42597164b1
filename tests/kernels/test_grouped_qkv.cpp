// Grouped-query expansion of key/value groups to heads, and its adjoint (the heads'
// gradients summed into their groups).
#include <gtest/gtest.h>

#include <vector>

#include "kernels/grouped_qkv.h"
#include "test_util.h"

namespace trident {
namespace {

using testing::random_vector;

TEST(GroupedQkv, ExpandsGroupsAndSumsTheirGradients) {
  const int rows = 3, heads = 4, d = 2;
  for (int first : {0, 1}) {  // groups held, or replicated with this rank's heads in group 1
    const kernels::QueryGroups g{heads, 2, first == 0 ? 2 : 4, first, d};
    auto q = random_vector((long)rows * heads * d, 31), kv = random_vector(rows * 2L * 2 * d, 32);
    std::vector<float> qkv((size_t)rows * 3 * heads * d);
    kernels::expand_grouped_qkv(q.data(), kv.data(), qkv.data(), rows, g);
    for (int r = 0; r < rows; ++r)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < d; ++i) {
          const int group = first + h / g.heads_per_group;
          const float* row = qkv.data() + (long)r * 3 * heads * d;
          EXPECT_EQ(row[h * d + i], q[(r * heads + h) * d + i]);
          EXPECT_EQ(row[(heads + h) * d + i], kv[(r * 4 + group) * d + i]);
          EXPECT_EQ(row[(2 * heads + h) * d + i], kv[(r * 4 + 2 + group) * d + i]);
        }
    // The adjoint: <expand(q, kv), w> = <q, dq> + <kv, dkv> for every q, kv.
    auto w = random_vector((long)qkv.size(), 33);
    std::vector<float> dq(q.size()), dkv(kv.size());
    kernels::reduce_grouped_qkv_grad(w.data(), dq.data(), dkv.data(), rows, g);
    double lhs = 0, rhs = 0;
    for (size_t i = 0; i < qkv.size(); ++i) lhs += (double)qkv[i] * w[i];
    for (size_t i = 0; i < q.size(); ++i) rhs += (double)q[i] * dq[i];
    for (size_t i = 0; i < kv.size(); ++i) rhs += (double)kv[i] * dkv[i];
    EXPECT_NEAR(lhs, rhs, 1e-4);
  }
}

}  // namespace
}  // namespace trident
