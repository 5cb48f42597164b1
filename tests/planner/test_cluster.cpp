// The cluster description read by `trident plan --cluster`: the shipped files parse to
// their datasheet numbers, and every bad key is reported with the file, key and rule.
#include <gtest/gtest.h>

#include <stdexcept>

#include "planner/cluster.h"

namespace trident::planner {
namespace {

const char* kIssueExample = R"(
nodes = 384
[device]
name = "A100-80GB"
peak_tflops = 312
memory_gib = 80
[node]
devices = 8
intra_node_bandwidth_gbs = 300
intra_node_latency_us = 5
[network]
inter_node_bandwidth_gbs = 25
inter_node_latency_us = 10
)";

std::string error_of(const std::string& text) {
  try {
    parse_cluster(text, "bad.toml");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(PlannerCluster, TheIssueExampleParses) {
  Cluster c = parse_cluster(kIssueExample, "example.toml");
  EXPECT_EQ(c.nodes, 384);
  EXPECT_EQ(c.device.name, "A100-80GB");
  EXPECT_DOUBLE_EQ(c.device.peak_tflops, 312);
  EXPECT_DOUBLE_EQ(c.device.memory_gib, 80);
  EXPECT_DOUBLE_EQ(c.device.memory_bandwidth_gbs, 0);  // optional
  EXPECT_EQ(c.devices_per_node, 8);
  EXPECT_DOUBLE_EQ(c.intra_node.bandwidth_gbs, 300);
  EXPECT_DOUBLE_EQ(c.inter_node.latency_us, 10);
  EXPECT_EQ(c.num_devices(), 3072);
}

TEST(PlannerCluster, ShippedFilesCarryTheDatasheetNumbers) {
  Cluster a100 = load_cluster(TRIDENT_SOURCE_DIR "/clusters/dgx-a100.toml");
  EXPECT_EQ(a100.num_devices(), 3072);  // the PTD-P paper's largest run
  EXPECT_DOUBLE_EQ(a100.device.peak_tflops, 312);
  EXPECT_DOUBLE_EQ(a100.device.memory_bandwidth_gbs, 2039);
  Cluster h100 = load_cluster(TRIDENT_SOURCE_DIR "/clusters/dgx-h100.toml");
  EXPECT_DOUBLE_EQ(h100.device.peak_tflops, 989);
  EXPECT_DOUBLE_EQ(h100.intra_node.bandwidth_gbs, 450);
  EXPECT_DOUBLE_EQ(h100.inter_node.bandwidth_gbs, 50);
  Cluster here = load_cluster(TRIDENT_SOURCE_DIR "/clusters/this-machine.toml");
  EXPECT_EQ(here.nodes, 1);
}

TEST(PlannerCluster, EveryViolationNamesFileKeyAndRule) {
  std::string text = kIssueExample;
  text.replace(text.find("peak_tflops = 312"), 17, "peak_tflops = -1");
  text.replace(text.find("devices = 8"), 11, "devices = 2.5");
  text += "typo_key = 3\n";
  std::string e = error_of(text);
  EXPECT_NE(e.find("bad.toml: [device] peak_tflops must be > 0 (got -1)"), std::string::npos) << e;
  EXPECT_NE(e.find("bad.toml: [node] devices must be an integer"), std::string::npos) << e;
  EXPECT_NE(e.find("bad.toml: [network] typo_key is not a known key"), std::string::npos) << e;
}

TEST(PlannerCluster, MissingSectionsAndKeysAreNamed) {
  std::string e = error_of("nodes = 2\n[device]\nname = \"x\"\n");
  EXPECT_NE(e.find("[device] peak_tflops is required"), std::string::npos) << e;
  EXPECT_NE(e.find("[node] is required"), std::string::npos) << e;
  EXPECT_NE(e.find("[network] is required"), std::string::npos) << e;
  EXPECT_NE(error_of("nodes = [").find("bad.toml: not valid TOML"), std::string::npos);
  EXPECT_NE(error_of("").find("nodes is required"), std::string::npos);
}

TEST(PlannerCluster, DefaultCurveAndCalibratedTable) {
  GemmEfficiency curve;  // 0.9 * F / (F + 8 GFLOP)
  EXPECT_NEAR(curve.at(8e9), 0.45, 1e-12);
  EXPECT_NEAR(curve.at(792e9), 0.9 * 792 / 800, 1e-12);
  GemmEfficiency table;
  table.table = {{1, 0.2}, {100, 0.6}};
  EXPECT_DOUBLE_EQ(table.at(0.1e9), 0.2);  // clamped at the ends
  EXPECT_DOUBLE_EQ(table.at(1e12), 0.6);
  EXPECT_NEAR(table.at(10e9), 0.4, 1e-12);  // halfway in log(F)
}

// The calibrated grid: m x n x n products by rows m and width n, read for m x n x k at
// width sqrt(n k), bilinear in log m and log width, clamped at the edges.
TEST(PlannerCluster, GemmGridByRowsAndWidth) {
  GemmEfficiency g;
  g.table = {{1, 0.5}};
  g.grid_rows = {100, 400};
  g.grid_width = {10, 1000};
  g.grid = {0.2, 0.4,   // 100 rows
            0.6, 0.8};  // 400 rows
  EXPECT_DOUBLE_EQ(g.at(100, 10, 10), 0.2);
  EXPECT_DOUBLE_EQ(g.at(400, 1000, 1000), 0.8);
  EXPECT_NEAR(g.at(200, 100, 100), 0.5, 1e-12);  // halfway in both logs
  EXPECT_NEAR(g.at(100, 10, 1e5), 0.4, 1e-12);   // width sqrt(10 x 1e5) = 1000: the far column
  EXPECT_NEAR(g.at(1e4, 1, 1), 0.6, 1e-12);      // clamped: most rows, narrowest
  GemmEfficiency flops_only;
  flops_only.table = {{1, 0.25}, {100, 0.75}};
  EXPECT_DOUBLE_EQ(flops_only.at(1000, 1000, 1000), flops_only.at(2e9));  // no grid: by FLOPs
}

TEST(PlannerCluster, GradientAccumulationIsFusedOrSeparate) {
  EXPECT_FALSE(parse_cluster(kIssueExample, "a.toml").kernels.separate_gradient_accumulation);
  std::string text =
      std::string(kIssueExample) + "[compute]\nweight_gradient_accumulation = \"both\"\n";
  EXPECT_NE(
      error_of(text).find(
          "bad.toml: [compute] weight_gradient_accumulation must be \"fused\" or \"separate\""),
      std::string::npos)
      << error_of(text);
}

TEST(PlannerCluster, GemmGridMustMatchItsAxes) {
  std::string text = std::string(kIssueExample) +
                     "[compute]\ngemm_grid_rows = [128.0, 512.0]\ngemm_grid_width = [64.0]\n"
                     "gemm_grid_efficiency = [0.5]\n";
  EXPECT_NE(error_of(text).find("bad.toml: [compute] gemm_grid_efficiency"), std::string::npos)
      << error_of(text);
}

TEST(PlannerCluster, TomlRoundTrip) {
  Cluster c = parse_cluster(kIssueExample, "example.toml");
  c.gemm.table = {{0.5, 0.3}, {50, 0.7}};
  c.device.memory_bandwidth_gbs = 40;
  Cluster back = parse_cluster(cluster_to_toml(c), "again.toml");
  EXPECT_EQ(back.nodes, c.nodes);
  EXPECT_EQ(back.gemm.table, c.gemm.table);
  EXPECT_DOUBLE_EQ(back.device.memory_bandwidth_gbs, 40);
  EXPECT_DOUBLE_EQ(back.inter_node.bandwidth_gbs, 25);
  c.device.name = "quote \" backslash \\ tab \t";
  c.device.peak_tflops = 0.1 + 0.2;  // not short in decimal
  // Exponents (TOML writes them without leading zeros) and whole numbers (written as floats:
  // a TOML array may not mix integers and floats).
  c.gemm.table = {{1e-5, 0.3}, {2, 1}, {2e22, 0.7}};
  back = parse_cluster(cluster_to_toml(c), "again.toml");
  EXPECT_EQ(back.device.name, c.device.name);
  EXPECT_EQ(back.device.peak_tflops, c.device.peak_tflops);
  EXPECT_EQ(back.gemm.table, c.gemm.table);
  c.gemm.grid_rows = {128, 2048}, c.gemm.grid_width = {256};
  c.gemm.grid = {0.7, 0.1 + 0.8};
  c.kernels.optimizer_ns_per_parameter = 0.7;
  c.kernels.separate_gradient_accumulation = true;
  back = parse_cluster(cluster_to_toml(c), "again.toml");
  EXPECT_TRUE(back.kernels.separate_gradient_accumulation);
  EXPECT_EQ(back.kernels.optimizer_ns_per_parameter, 0.7);
  EXPECT_EQ(back.gemm.grid_rows, c.gemm.grid_rows);
  EXPECT_EQ(back.gemm.grid_width, c.gemm.grid_width);
  EXPECT_EQ(back.gemm.grid, c.gemm.grid);
}

}  // namespace
}  // namespace trident::planner
