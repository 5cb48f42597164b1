// Pipeline schedules for every p <= 8, v <= 4 and a range of valid m: each micro-batch's
// forward precedes its backward on every chunk, every send has its receive, all ranks'
// lists run together without deadlock, the warm-up matches the paper, and the simulated
// bubble equals (p - 1) / (v m).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "pipeline_parallel/schedules.h"
#include "pipeline_parallel/simulator.h"

namespace trident::pipeline_parallel {
namespace {

std::vector<ScheduleConfig> all_configs() {
  std::vector<ScheduleConfig> out;
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 2 * p + 1; ++m) {
      out.push_back({ScheduleKind::kOneFOneB, p, 1, m});
      out.push_back({ScheduleKind::kGPipe, p, 1, m});
    }
    if (p >= 2)
      for (int v = 1; v <= 4; ++v)
        for (int m = p; m <= 3 * p; m += p) out.push_back({ScheduleKind::kInterleaved, p, v, m});
  }
  return out;
}

std::string describe(const ScheduleConfig& c) {
  return schedule_name(c.kind) + " p=" + std::to_string(c.stages) +
         " v=" + std::to_string(c.chunks) + " m=" + std::to_string(c.microbatches);
}

TEST(Schedules, EveryMicroBatchRunsForwardThenBackwardOncePerChunk) {
  for (const ScheduleConfig& c : all_configs())
    for (int s = 0; s < c.stages; ++s) {
      std::map<std::pair<int, int>, int> state;  // 0 none, 1 forward done, 2 backward done
      for (const PipelineOp& op : build_schedule(c, s)) {
        auto& st = state[{op.microbatch, op.chunk}];
        if (op.type == OpType::kForward) {
          ASSERT_EQ(st++, 0) << describe(c) << " rank " << s;
        }
        if (op.type == OpType::kBackward) {
          ASSERT_EQ(st++, 1) << describe(c) << " rank " << s;
        }
      }
      ASSERT_EQ((int)state.size(), c.microbatches * c.chunks) << describe(c);
      for (const auto& [key, st] : state) ASSERT_EQ(st, 2) << describe(c);
    }
}

TEST(Schedules, EverySendHasItsReceive) {
  for (const ScheduleConfig& c : all_configs()) {
    std::multiset<std::tuple<int, int, int>> sends, recvs;  // (from, to, tag)
    for (int s = 0; s < c.stages; ++s)
      for (const PipelineOp& op : build_schedule(c, s)) {
        if (op.is_send()) sends.insert({s, op.peer, message_tag(c, op, s)});
        if (op.is_recv()) recvs.insert({op.peer, s, message_tag(c, op, s)});
      }
    ASSERT_EQ(sends, recvs) << describe(c);
    // Tags are unique per pair of ranks, so no message can be taken for another.
    std::set<std::tuple<int, int, int>> unique(sends.begin(), sends.end());
    ASSERT_EQ(unique.size(), sends.size()) << describe(c);
  }
}

TEST(Schedules, AllRanksTogetherNeverDeadlockAndMatchTheAnalyticBubble) {
  for (const ScheduleConfig& c : all_configs()) {
    Simulation sim = simulate(c, 1.0, 2.0);
    ASSERT_FALSE(sim.deadlock) << describe(c) << ": " << sim.deadlock_at;
    if (c.kind == ScheduleKind::kGPipe && c.chunks > 1) continue;
    for (int s = 0; s < c.stages; ++s)
      EXPECT_NEAR(sim.bubble_fraction(s), analytic_bubble_fraction(c), 1e-9)
          << describe(c) << " rank " << s;
  }
}

TEST(Schedules, WarmupCountsMatchThePaper) {
  for (const ScheduleConfig& c : all_configs())
    for (int s = 0; s < c.stages; ++s) {
      int forwards = 0;
      for (const PipelineOp& op : build_schedule(c, s)) {
        if (op.type == OpType::kBackward) break;
        forwards += op.type == OpType::kForward;
      }
      const int p = c.stages, v = c.chunks, m = c.microbatches, total = m * v;
      int expect = 0;
      if (c.kind == ScheduleKind::kGPipe) expect = total;
      if (c.kind == ScheduleKind::kOneFOneB) expect = std::min(p - s - 1, m);
      if (c.kind == ScheduleKind::kInterleaved)
        expect = m == p ? total : std::min((p - s - 1) * 2 + (v - 1) * p, total);
      // Steady state starts with one more forward before the first backward.
      EXPECT_EQ(forwards, std::min(expect + 1, total)) << describe(c) << " rank " << s;
      EXPECT_EQ(warmup_forwards(c, s), expect) << describe(c) << " rank " << s;
    }
}

TEST(Schedules, OneFOneBHoldsAtMostPMinusSMicroBatches) {
  for (int p = 1; p <= 8; ++p)
    for (int m = p; m <= 3 * p; ++m)
      for (int s = 0; s < p; ++s) {
        ScheduleConfig c{ScheduleKind::kOneFOneB, p, 1, m};
        EXPECT_EQ(max_in_flight(build_schedule(c, s), 1)[0], p - s) << describe(c);
        ScheduleConfig g{ScheduleKind::kGPipe, p, 1, m};
        EXPECT_EQ(max_in_flight(build_schedule(g, s), 1)[0], m);
      }
}

TEST(Schedules, MegatronRulesWithInterleavingAllowedAtTwoStages) {
  EXPECT_TRUE(validate_schedule({ScheduleKind::kInterleaved, 2, 2, 4}).empty());
  auto errors = validate_schedule({ScheduleKind::kInterleaved, 4, 2, 6});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("multiple of --pipeline-model-parallel-size (4)"), std::string::npos);
  EXPECT_FALSE(validate_schedule({ScheduleKind::kOneFOneB, 4, 2, 8}).empty());
  EXPECT_THROW(build_schedule({ScheduleKind::kInterleaved, 4, 2, 6}, 0), std::invalid_argument);
}

}  // namespace
}  // namespace trident::pipeline_parallel
