// `trident plan --calibrate` on one rank, briefly: a cluster description that parses back,
// with a peak, a bandwidth and an ascending GEMM table of efficiencies in (0, 1].
#include <gtest/gtest.h>

#include <sstream>

#include "comm/communicator.h"
#include "planner/calibrate.h"

namespace trident::planner {
namespace {

TEST(PlannerCalibrate, OneRankGivesAValidDescription) {
  comm::SingleRankCommunicator world("world");
  CalibrationOptions o;
  o.seconds_per_point = 0.005;
  o.bandwidth_seconds = 0.05;
  o.repeats = 1;
  o.long_sequence = 512, o.vocabulary = 4096;  // small, so the test stays quick under ASan
  std::ostringstream log;
  Cluster c = calibrate_this_machine(world, o, log);
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.devices_per_node, 1);
  EXPECT_GT(c.device.peak_tflops, 0);
  EXPECT_GT(c.device.memory_bandwidth_gbs, 0);
  ASSERT_GE(c.gemm.table.size(), 5u);
  for (size_t i = 0; i < c.gemm.table.size(); ++i) {
    EXPECT_GT(c.gemm.table[i].second, 0);
    EXPECT_LE(c.gemm.table[i].second, 1);
    if (i) {
      EXPECT_LT(c.gemm.table[i - 1].first, c.gemm.table[i].first);
    }
  }
  Cluster back = parse_cluster(cluster_to_toml(c), "calibrated.toml");
  EXPECT_EQ(back.gemm.table.size(), c.gemm.table.size());
  EXPECT_NE(log.str().find("one rank: no link to measure"), std::string::npos);
  EXPECT_GT(back.kernels.attention_efficiency, 0);
  EXPECT_LE(back.kernels.attention_efficiency, 1);
  EXPECT_GT(back.kernels.elementwise_ns_per_element, 0);
  EXPECT_GT(back.kernels.cross_entropy_ns_per_logit, 0);
  // A positive time per parameter, below a microsecond (AdamW is a few dozen bytes and
  // FLOPs a parameter); not compared with the bandwidth, timed at another moment.
  EXPECT_GT(back.kernels.optimizer_ns_per_parameter, 0);
  EXPECT_LT(back.kernels.optimizer_ns_per_parameter, 1000);
  // The grid by shape: one efficiency per (rows, width), each in (0, 1].
  ASSERT_EQ(back.gemm.grid.size(), back.gemm.grid_rows.size() * back.gemm.grid_width.size());
  ASSERT_FALSE(back.gemm.grid.empty());
  for (double e : back.gemm.grid) EXPECT_TRUE(e > 0 && e <= 1) << e;
}

}  // namespace
}  // namespace trident::planner
