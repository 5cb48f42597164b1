#pragma once
// `trident plan --calibrate --output FILE`, run under mpirun with one rank per device: this
// machine's cluster description, measured with trident's own kernels and MPI. Every rank
// measures at once, as in training (the ranks share the cores and the memory bus):
// - peak: trident's multiply-add loop for the precision, times this rank's share of cores;
// - GEMM efficiency by size: trident's products (oneDNN fp32 or bf16) over a grid of
//   layer-like shapes, as a fraction of that peak;
// - memory bandwidth: a read + write stream over a buffer far larger than the caches;
// - the attention core and the element-wise kernels: transformer layers trident builds, at
//   two shapes, less their products; the cross-entropy: an output layer over GPT-2's
//   vocabulary, less its products;
// - links: point-to-point latency (ping-pong of 8 bytes) and the bandwidth that makes the
//   ring model reproduce a measured all-reduce of 64 MiB over all ranks.
// Each timing is the best of several runs, so neighbours on a shared machine lower it less.
// Across several nodes (the same number of ranks on each), the links are measured twice:
// among the ranks of each node at once (intra-node) and among one rank per node (inter-node);
// on one node the inter-node link is a copy of the intra-node one.
#include <iosfwd>

#include "comm/communicator.h"
#include "kernels/low_precision.h"
#include "planner/cluster.h"

namespace trident::planner {

struct CalibrationOptions {
  kernels::Precision precision = kernels::Precision::kFp32;
  double seconds_per_point = 0.25;  // each GEMM shape
  double bandwidth_seconds = 1.0;
  int repeats = 5;           // forward + backward runs of each calibration chunk (the best counts)
  int long_sequence = 1024;  // of the attention-heavy layer (a multiple of 128 above it)
  int vocabulary = 50257;    // of the cross-entropy's output layer (GPT-2's)
  int ranks_on_node = 1;
};

// How the ranks sit on nodes: this rank's node's ranks, and one rank per node (null on the
// ranks that are not their node's first). Both null: every rank on one node.
struct NodeGroups {
  comm::Communicator* node = nullptr;
  comm::Communicator* leaders = nullptr;
  int nodes = 1;
};

// Collective over `world`; every rank returns the same cluster. Progress goes to `log`.
Cluster calibrate_this_machine(comm::Communicator& world, const CalibrationOptions& options,
                               std::ostream& log, const NodeGroups& groups = {});

}  // namespace trident::planner
