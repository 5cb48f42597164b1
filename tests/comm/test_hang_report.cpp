// The hang diagnosis (comm/hang_report.h) from facts a watchdog would gather: who waits,
// who never arrived, hosts that fell silent.
#include <gtest/gtest.h>

#include "comm/hang_report.h"

namespace trident::comm {
namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Four ranks, data groups [0, 2] and [1, 3] (index 1), rank 0 timed out in all-reduce #5.
HangFacts data_hang() {
  HangFacts f;
  f.rank = 0;
  f.timeout_s = 6;
  f.groups = {{"world", {0, 1, 2, 3}}, {"data", {0, 2}}};
  f.nodes = {"h0", "h0", "h1", "h1"};
  f.self.iteration = 3;
  f.self.op = {OpKind::kAllReduce, 1, 5, -1};
  f.self.waited_ms = 6000;
  f.self.issued[1] = 5;
  f.answers.resize(4);
  return f;
}

TEST(HangReport, NamesOperationGroupIterationAndSilentRank) {
  HangFacts f = data_hang();
  Activity one;
  one.iteration = 3;
  one.op = {OpKind::kAllReduce, 1, 5, -1};
  one.waited_ms = 5900;
  one.issued[1] = 5;
  f.answers[1] = one;
  const std::string text = describe_hang(f);
  EXPECT_TRUE(has(text,
                  "hang: rank 0@h0 waited 6.0 s (--distributed-timeout-minutes 0.1) for "
                  "all-reduce #5 of the data group [0, 2] at iteration 3"))
      << text;
  EXPECT_TRUE(has(text, "waiting: rank 0@h0\n")) << text;
  EXPECT_TRUE(has(text, "never arrived: rank 2@h1 (no answer")) << text;
  EXPECT_TRUE(
      has(text, "rank 1@h0: iteration 3, waiting 5.9 s for all-reduce #5 of the data group"))
      << text;
  EXPECT_TRUE(has(text, "no rank on host h1 answered")) << text;
  EXPECT_TRUE(has(text, "or unreachable): rank 2@h1, rank 3@h1\n")) << text;
}

TEST(HangReport, RankBehindInItsGroupNeverArrivedAndSaysWhereItIs) {
  HangFacts f = data_hang();
  Activity two;  // still in the pipeline's recv, before its 5th data-parallel collective
  two.iteration = 3;
  two.op = {OpKind::kRecv, 2, 0, 0};
  two.waited_ms = 4000;
  two.issued[1] = 4;
  f.groups.push_back({"pipeline", {0, 2}});
  f.answers[1] = Activity{};
  f.answers[2] = two;
  f.answers[3] = Activity{};
  const std::string text = describe_hang(f);
  EXPECT_TRUE(has(text,
                  "never arrived: rank 2@h1 (iteration 3, waiting 4.0 s for recv from "
                  "rank 0@h0 over the pipeline group)"))
      << text;
  EXPECT_FALSE(has(text, "no rank on host")) << text;
}

TEST(HangReport, ArrivedMemberCountsAsWaiting) {
  HangFacts f = data_hang();
  Activity two;
  two.iteration = 3;
  two.op = {OpKind::kAllReduce, 1, 5, -1};
  two.issued[1] = 5;
  f.answers[2] = two;
  const std::string text = describe_hang(f);
  EXPECT_TRUE(has(text, "waiting: rank 0@h0, rank 2@h1")) << text;
  EXPECT_TRUE(has(text, "never arrived: none")) << text;
}

TEST(HangReport, PointToPointNamesThePeer) {
  HangFacts f = data_hang();
  f.groups.push_back({"pipeline", {0, 1}});
  f.self.op = {OpKind::kRecv, 2, 0, 1};
  const std::string text = describe_hang(f);
  EXPECT_TRUE(has(text, "for recv from rank 1@h0 over the pipeline group at iteration 3")) << text;
  EXPECT_TRUE(has(text, "never arrived: rank 1@h0 (no answer")) << text;
}

}  // namespace
}  // namespace trident::comm
