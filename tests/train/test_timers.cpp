// The timers' rows of the context group and the ring's overlap, from counters set by hand:
// the fraction is 1 - waited / (overlapped bytes x the per-byte time of the lone transfers),
// clamped to [0, 1]; nothing of the ring shows at level 1 or when no ring ran.
#include <gtest/gtest.h>

#include "train/timers.h"

namespace trident::train {
namespace {

// The five timed groups' step counters, the context group's overlap as given.
GroupCollectives groups_with(const comm::CollectiveCounters::Overlap& ring) {
  GroupCollectives g = {
      {"tensor", {}}, {"data", {}}, {"pipeline", {}}, {"expert", {}}, {"context", {}}};
  g[4].second.overlap = ring;
  g[4].second.send = {3, 3000, 0.004};  // 4 ms in MPI's send waits
  return g;
}

const TimerRow* row(const TimerReport& r, const std::string& name) {
  for (const TimerRow& row : r.rows)
    if (row.name == name) return &row;
  return nullptr;
}

TEST(IntervalTimers, RingRowsAndOverlapFromTheContextGroup) {
  // 2 ms of compute with 1000 bytes in flight, then 1 ms waited; a lone transfer took 5 ms
  // for 1000 bytes. Transfers alone: 1000 x 5 ms / 1000 = 5 ms; overlap 1 - 1 / 5 = 0.8.
  comm::CollectiveCounters::Overlap ring{0.002, 0.001, 1000, 0.005, 1000};
  IntervalTimers timers(2, 0.2);
  timers.add_step({}, groups_with(ring));
  timers.add_step({}, groups_with(ring));  // two steps: the mean per iteration is the same
  comm::SingleRankCommunicator world("world");
  const TimerReport r = timers.reduce(world, 0);
  ASSERT_TRUE(row(r, "context-send") && row(r, "cp-ring-compute") && row(r, "cp-ring-wait") &&
              row(r, "cp-ring-transfer"));
  EXPECT_NEAR(row(r, "context-send")->max_ms, 4.0, 1e-4);
  EXPECT_NEAR(row(r, "cp-ring-compute")->max_ms, 2.0, 1e-4);
  EXPECT_NEAR(row(r, "cp-ring-wait")->max_ms, 1.0, 1e-4);
  EXPECT_NEAR(row(r, "cp-ring-transfer")->max_ms, 5.0, 1e-4);
  ASSERT_TRUE(r.ring_overlap.found);
  EXPECT_NEAR(r.ring_overlap.min, 0.8, 1e-6);
  EXPECT_NEAR(r.ring_overlap.max, 0.8, 1e-6);
  EXPECT_NE(format_timers(r, {}).find("    cp-ring-overlap       : (0.800, 0.800)"),
            std::string::npos)
      << format_timers(r, {});
}

TEST(IntervalTimers, OverlapIsClampedAndAbsentWithoutARing) {
  // Waited 3x a lone transfer's time (the neighbour was late): 0, not negative.
  comm::CollectiveCounters::Overlap late{0.002, 0.003, 1000, 0.001, 1000};
  IntervalTimers timers(2, 0.2);
  timers.add_step({}, groups_with(late));
  comm::SingleRankCommunicator world("world");
  const TimerReport r = timers.reduce(world, 0);
  ASSERT_TRUE(r.ring_overlap.found);
  EXPECT_EQ(r.ring_overlap.min, 0.0);

  timers.add_step({}, groups_with({}));  // c = 1: the context group saw nothing
  const TimerReport none = timers.reduce(world, 0);
  EXPECT_FALSE(none.ring_overlap.found);
  for (const TimerRow& row : none.rows) EXPECT_EQ(row.name.rfind("cp-ring", 0), std::string::npos);

  IntervalTimers coarse(1, 0.2);  // level 1: no per-group rows, no ring
  coarse.add_step({}, groups_with({0.002, 0.001, 1000, 0.005, 1000}));
  const TimerReport level1 = coarse.reduce(world, 0);
  EXPECT_EQ(row(level1, "cp-ring-compute"), nullptr);
  EXPECT_EQ(row(level1, "context-send"), nullptr);
  EXPECT_FALSE(level1.ring_overlap.found);
}

}  // namespace
}  // namespace trident::train
