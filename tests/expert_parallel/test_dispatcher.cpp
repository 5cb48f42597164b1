// The alltoall dispatcher on EP threads (tests/tensor_parallel/thread_group.h): every row
// carries (source rank, global expert, position) so where it lands is checked against the
// order worked out here from Megatron's layout (local experts contiguous per rank, rows
// [local expert][source] after the sort); combine brings each row back to where it left;
// and combine is dispatch's adjoint (<dispatch x, y> = <x, combine y>), which is what makes
// it the backward.
#include <gtest/gtest.h>

#include <mutex>
#include <random>
#include <vector>

#include "../tensor_parallel/thread_group.h"
#include "expert_parallel/dispatcher.h"

namespace trident::expert_parallel {
namespace {

using tensor_parallel_test::run_group;

constexpr int kExperts = 8, kWidth = 3;

// How many rows source rank `r` has for global expert e (some zero, uneven).
long rows_for(int r, int e) {
  return (r * 7 + e * 3) % 5;
}

float cell(int r, int e, long i, int c) {
  return (float)(r * 10000 + e * 100 + i * kWidth + c);
}

// Source rank r's expert-major rows.
std::vector<float> rows_of(int r) {
  std::vector<float> v;
  for (int e = 0; e < kExperts; ++e)
    for (long i = 0; i < rows_for(r, e); ++i)
      for (int c = 0; c < kWidth; ++c) v.push_back(cell(r, e, i, c));
  return v;
}

class Dispatcher : public ::testing::TestWithParam<int> {};

TEST_P(Dispatcher, RowsReachTheirExpertsSortedAndComeBack) {
  const int ep = GetParam(), local = kExperts / ep;
  run_group(ep, [&](comm::Communicator& expert) {
    const int me = expert.rank();
    std::vector<long> counts(kExperts);
    for (int e = 0; e < kExperts; ++e) counts[e] = rows_for(me, e);
    const DispatchPlan plan = plan_dispatch(expert, counts.data(), kExperts);
    // What this rank must receive: for each local expert, each source's rows in order.
    std::vector<float> expected;
    std::vector<long> offsets = {0};
    for (int e = me * local; e < (me + 1) * local; ++e) {
      for (int q = 0; q < ep; ++q)
        for (long i = 0; i < rows_for(q, e); ++i)
          for (int c = 0; c < kWidth; ++c) expected.push_back(cell(q, e, i, c));
      offsets.push_back((long)expected.size() / kWidth);
    }
    EXPECT_EQ(plan.expert_offsets, offsets);
    ASSERT_EQ(plan.received() * kWidth, (long)expected.size());
    const std::vector<float> rows = rows_of(me);
    EXPECT_EQ(plan.sent() * kWidth, (long)rows.size());
    std::vector<float> staging(expected.size()), out(expected.size(), -1.f);
    dispatch(expert, plan, rows.data(), kWidth, staging.data(), out.data());
    EXPECT_EQ(out, expected);
    std::vector<float> back(rows.size(), -1.f);
    combine(expert, plan, out.data(), kWidth, staging.data(), back.data());
    EXPECT_EQ(back, rows);
    // replan_dispatch rebuilds the same plan from the exchanged counts alone.
    const DispatchPlan again =
        replan_dispatch(ep, counts.data(), kExperts, plan.recv_counts.data());
    EXPECT_EQ(again.send_rows, plan.send_rows);
    EXPECT_EQ(again.recv_rows, plan.recv_rows);
    EXPECT_EQ(again.expert_offsets, plan.expert_offsets);
  });
}

TEST_P(Dispatcher, CombineIsTheAdjointOfDispatch) {
  const int ep = GetParam();
  std::mutex mutex;
  double lhs = 0, rhs = 0;  // summed over ranks
  run_group(ep, [&](comm::Communicator& expert) {
    const int me = expert.rank();
    std::vector<long> counts(kExperts);
    for (int e = 0; e < kExperts; ++e) counts[e] = rows_for(me, e);
    const DispatchPlan plan = plan_dispatch(expert, counts.data(), kExperts);
    std::mt19937 gen(17 + me);
    std::normal_distribution<float> normal;
    std::vector<float> x(plan.sent() * kWidth), y(plan.received() * kWidth);
    for (float& v : x) v = normal(gen);
    for (float& v : y) v = normal(gen);
    std::vector<float> dx(y.size()), cy(x.size()), staging(y.size());
    dispatch(expert, plan, x.data(), kWidth, staging.data(), dx.data());
    combine(expert, plan, y.data(), kWidth, staging.data(), cy.data());
    double a = 0, b = 0;
    for (size_t i = 0; i < y.size(); ++i) a += (double)dx[i] * y[i];
    for (size_t i = 0; i < x.size(); ++i) b += (double)x[i] * cy[i];
    std::lock_guard<std::mutex> lock(mutex);
    lhs += a, rhs += b;
  });
  EXPECT_NEAR(lhs, rhs, 1e-9 * (1 + std::abs(lhs)));
}

INSTANTIATE_TEST_SUITE_P(ExpertParallelSizes, Dispatcher, ::testing::Values(1, 2, 4, 8));

TEST(DispatchBounds, WorstCaseReceivedRows) {
  // 4 ranks of 2 experts each, top-2: every source may send both rows of every token.
  EXPECT_EQ(max_received_rows(16, 2, 8, 4), 4 * 16 * 2);
  // Top-4 of 8 over 4 ranks: at most 2 of a token's rows go to one rank.
  EXPECT_EQ(max_received_rows(16, 4, 8, 4), 4 * 16 * 2);
  EXPECT_EQ(max_received_rows(16, 2, 8, 1), 16 * 2);
}

}  // namespace
}  // namespace trident::expert_parallel
