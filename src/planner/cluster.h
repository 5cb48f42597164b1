#pragma once
// A cluster on paper (`trident plan --cluster FILE`): its devices, how many a node holds,
// and the links inside a node and between nodes. The performance model reads only this;
// every constant it uses is a key here, so calibrating a machine means writing a file.
#include <string>
#include <utility>
#include <vector>

namespace trident::planner {

struct DeviceSpec {
  std::string name;
  double peak_tflops = 0;           // dense, of the training precision
  double memory_gib = 0;            // what one device may hold
  double memory_bandwidth_gbs = 0;  // optional: optimizer and element-wise time (0: not modelled)
  double runtime_memory_gib = 0;    // optional: what a process holds before any buffer
};

struct LinkSpec {
  double bandwidth_gbs = 0;  // GB/s per device, one direction
  double latency_us = 0;     // per message
};

// The fraction of peak a matrix product reaches, as a function of its size in FLOPs: the
// GPU default is the stated curve max * F / (F + F_half) (small products cannot fill the
// machine); a calibrated file gives measured points instead, interpolated in log(F).
// Calibration also keeps its grid of m x n x n products by rows m and width n: a product
// of m rows, n columns and depth k is read there at m rows and width sqrt(n k) (few rows
// and a wide weight are slower than their FLOPs say), interpolated in log m and log width.
struct GemmEfficiency {
  double max_efficiency = 0.9;
  double half_efficiency_gflop = 8.0;
  std::vector<std::pair<double, double>> table;  // (GFLOP, efficiency), ascending GFLOP
  std::vector<double> grid_rows, grid_width;     // ascending
  std::vector<double> grid;                      // [rows][width]
  double at(double flops) const;
  double at(double m, double n, double k) const;  // the grid's when there is one
};

// The kernels that are not matrix products. Measured by calibration; by default derived from
// the memory bandwidth: an element access moves 4 bytes, a logit is accessed 4 times (read
// for the maximum, rewritten as its exponential, read for the sum and the gradient), and the
// attention core runs at the GEMM efficiency of its products.
struct OtherKernels {
  double attention_efficiency = 0;        // 0: the GEMM curve's
  double elementwise_ns_per_element = 0;  // 0: 4 bytes at the memory bandwidth
  double cross_entropy_ns_per_logit = 0;  // 0: 16 bytes at the memory bandwidth
  // The gradient-norm pass and AdamW over one parameter of the rank's shard. 0: 34 bytes at
  // the memory bandwidth (value, gradient and two moments read, value, moments and the
  // 16-bit copy written, the gradient read again for the norm).
  double optimizer_ns_per_parameter = 0;
  // How a micro-batch's weight gradient reaches the accumulated fp32 one. "fused" (the
  // default; Megatron's --gradient-accumulation-fusion on GPUs): the product adds in place,
  // inside its own time. "separate" (trident's CPU kernels; calibration writes it): the bf16
  // product writes a fresh gradient that a second pass adds, memory traffic of its own.
  bool separate_gradient_accumulation = false;
  double elementwise_ns(const DeviceSpec& d) const;
  double cross_entropy_ns(const DeviceSpec& d) const;
  double optimizer_ns(const DeviceSpec& d) const;
};

struct Cluster {
  std::string source;  // the file it came from
  int nodes = 0;
  DeviceSpec device;
  int devices_per_node = 0;
  LinkSpec intra_node, inter_node;
  GemmEfficiency gemm;
  OtherKernels kernels;
  long num_devices() const { return (long)nodes * devices_per_node; }
};

// Reads and checks a cluster description; every violation (file, key, rule) is reported
// at once in the thrown std::invalid_argument.
Cluster load_cluster(const std::string& path);
Cluster parse_cluster(const std::string& toml_text, const std::string& source);

// The TOML text that parse_cluster reads back to the same cluster.
std::string cluster_to_toml(const Cluster& c);

}  // namespace trident::planner
