// Pipeline schedules for every p <= 8, v <= 4 and a range of valid m: each micro-batch's
// forward precedes its backward on every chunk, every send has its receive, all ranks'
// lists run together without deadlock, the warm-up matches the paper, and the simulated
// bubble equals (p - 1) / (v m). ZB-H1: F before B before W, once each; activations and
// F-to-W in-flight micro-batches within 1F1B's; and the paper's bubble.
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
      out.push_back({ScheduleKind::kZeroBubbleH1, p, 1, m});
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
    if (c.splits_backward()) continue;  // its bubble depends on W's share: tested below
    for (int s = 0; s < c.stages; ++s)
      EXPECT_NEAR(sim.bubble_fraction(s), analytic_bubble_fraction(c), 1e-9)
          << describe(c) << " rank " << s;
  }
}

// Stages that are not alike (the last also runs the output layer): with the last stage the
// slowest and no message latency, 1F1B keeps it busy from the first forward it receives, so
// the iteration is the other stages' first forwards, m x (the last stage's F + B), and their
// last backwards.
TEST(Schedules, UnequalStagesRunAtTheSlowestStagesPace) {
  for (int p : {2, 3, 4})
    for (int m : {p, 2 * p, 3 * p}) {
      ScheduleConfig c{ScheduleKind::kOneFOneB, p, 1, m};
      OpTimes t;
      double ramp = 0;
      for (int s = 0; s < p; ++s) {
        const bool last = s == p - 1;
        const double f = last ? 5.0 : 1.0 + 0.25 * s, b = last ? 9.0 : 2.0 + 0.5 * s;
        t.forward.push_back({f}), t.backward.push_back({b}), t.weight.push_back({0.0});
        if (!last) ramp += f + b;
      }
      Simulation sim = simulate(c, t);
      ASSERT_FALSE(sim.deadlock) << describe(c);
      EXPECT_NEAR(sim.makespan, ramp + m * 14.0, 1e-9) << describe(c);
      EXPECT_NEAR(sim.busy[p - 1], m * 14.0, 1e-9);
      // The equal-stage formula (p - 1) / m would overstate this bubble.
      EXPECT_LT(sim.bubble_fraction(p - 1), analytic_bubble_fraction(c));
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
      if (c.kind == ScheduleKind::kOneFOneB || c.kind == ScheduleKind::kZeroBubbleH1)
        expect = std::min(p - s - 1, m);
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

std::vector<ScheduleConfig> zero_bubble_configs() {
  std::vector<ScheduleConfig> out;
  for (int p = 1; p <= 8; ++p)
    for (int m = p; m <= 3 * p; ++m) out.push_back({ScheduleKind::kZeroBubbleH1, p, 1, m});
  return out;
}

TEST(ZeroBubbleH1, EveryMicroBatchRunsFThenBThenWOnce) {
  for (const ScheduleConfig& c : zero_bubble_configs())
    for (int s = 0; s < c.stages; ++s) {
      std::vector<int> state(c.microbatches, 0);  // ops done: F, then B, then W
      for (const PipelineOp& op : build_schedule(c, s)) {
        if (!op.is_compute()) continue;
        const int expect = op.type == OpType::kForward ? 0 : op.type == OpType::kBackward ? 1 : 2;
        ASSERT_EQ(state[op.microbatch]++, expect)
            << describe(c) << " rank " << s << " " << to_string(op);
      }
      for (int i = 0; i < c.microbatches; ++i) ASSERT_EQ(state[i], 3) << describe(c);
    }
}

// The F/B order is 1F1B's, so activations (F to B) are held exactly as long; counting from F
// to W, no rank holds more than p micro-batches, 1F1B's most (its rank 0).
TEST(ZeroBubbleH1, InFlightWithinOneFOneB) {
  for (const ScheduleConfig& c : zero_bubble_configs())
    for (int s = 0; s < c.stages; ++s) {
      std::vector<PipelineOp> zb = build_schedule(c, s);
      ScheduleConfig one = c;
      one.kind = ScheduleKind::kOneFOneB;
      std::vector<PipelineOp> base = build_schedule(one, s);
      EXPECT_EQ(max_in_flight(zb, 1), max_in_flight(base, 1)) << describe(c) << " rank " << s;
      EXPECT_LE(max_unfinished(zb, 1)[0], c.stages) << describe(c) << " rank " << s;
      EXPECT_EQ(max_unfinished(base, 1)[0], c.stages - s);
      EXPECT_EQ(max_deferred_weight_grads(zb, 1)[0], std::min(s + 1, c.microbatches));
      EXPECT_EQ(max_deferred_weight_grads(base, 1)[0], 0);
    }
}

// Qi et al. 2023, section 3.1: with B split into B and W, 1F1B idles (p - 1)(tf + tb + tw)
// per rank and ZB-H1 (p - 1)(tf + tb - tw) (for tw <= tf), a third of it when
// tf = tb = tw. Checked as idle time per rank, makespan minus compute, against the formulas.
TEST(ZeroBubbleH1, SimulatedBubbleIsThePapersValue) {
  struct Times {
    double f, b, w;
  };
  for (Times t : {Times{1, 1, 1}, Times{1, 1.5, 0.5}, Times{2, 1, 1}})
    for (const ScheduleConfig& c : zero_bubble_configs()) {
      Simulation zb = simulate(c, t.f, t.b, 0.0, t.w);
      ASSERT_FALSE(zb.deadlock) << describe(c) << ": " << zb.deadlock_at;
      ScheduleConfig one = c;
      one.kind = ScheduleKind::kOneFOneB;
      Simulation base = simulate(one, t.f, t.b, 0.0, t.w);
      const int p = c.stages, m = c.microbatches;
      for (int s = 0; s < p; ++s) {
        EXPECT_NEAR(zb.busy[s], m * (t.f + t.b + t.w), 1e-9);
        EXPECT_NEAR(base.makespan - base.busy[s], (p - 1) * (t.f + t.b + t.w), 1e-9);
        EXPECT_NEAR(zb.makespan - zb.busy[s], (p - 1) * (t.f + t.b - t.w), 1e-9)
            << describe(c) << " rank " << s << " times " << t.f << "/" << t.b << "/" << t.w;
        EXPECT_NEAR(zb.bubble_fraction(s), analytic_bubble_fraction(c, t.f, t.b, t.w), 1e-9);
      }
      if (t.f == t.b && t.b == t.w)
        EXPECT_NEAR(zb.makespan - zb.busy[0], (base.makespan - base.busy[0]) / 3, 1e-9);
    }
}

TEST(ZeroBubbleH1, ParsedAndOneChunkOnly) {
  EXPECT_EQ(parse_schedule_kind("zb-h1"), ScheduleKind::kZeroBubbleH1);
  EXPECT_EQ(schedule_name(ScheduleKind::kZeroBubbleH1), "zb-h1");
  EXPECT_TRUE(validate_schedule({ScheduleKind::kZeroBubbleH1, 4, 1, 3}).empty());
  EXPECT_FALSE(validate_schedule({ScheduleKind::kZeroBubbleH1, 4, 2, 8}).empty());
  // Rank 1 of 4: two warm-up forwards, then F/B pairs; W of micro-batch i after B of i + 1.
  std::string order;
  for (const PipelineOp& op : build_schedule({ScheduleKind::kZeroBubbleH1, 4, 1, 4}, 1))
    if (op.is_compute()) order += to_string(op) + " ";
  EXPECT_EQ(order, "F 0.0 F 1.0 F 2.0 B 0.0 F 3.0 B 1.0 W 0.0 B 2.0 W 1.0 B 3.0 W 2.0 W 3.0 ");
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
