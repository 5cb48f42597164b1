#pragma once
// What each data-parallel sharding strategy costs a rank per iteration, beside the memory
// plan training prints: the bytes its data-parallel collectives move and their time on the
// ring model, less what overlaps with compute; and ZeRO-3's memory, which training does not
// build yet, as an adjustment of the ZeRO-2 plan.
//
// Per iteration, with Psi this rank's parameters (its chunks' floats), m micro-batches per
// replica and every collective on fp32 (trident's wire format):
//   no_shard            one all-reduce of the gradients after the last backward: 2 Psi
//   optim (ZeRO-1)      one reduce-scatter + one all-gather of the updated values: 2 Psi
//   optim_grads (ZeRO-2) a reduce-scatter after every micro-batch's backward + one
//                       all-gather: (m + 1) Psi
//   optim_grads_params (ZeRO-3) per micro-batch the weights all-gathered before its forward
//                       and again before its backward, the gradients reduce-scattered: 3 m Psi
// each times (d - 1) / d on a ring (Rajbhandari et al. 2020, section 7: ZeRO-3 moves 1.5x the
// data of plain data parallelism at m = 1).
#include <vector>

#include "data_parallel/sharding_strategy.h"
#include "planner/cluster.h"
#include "planner/iteration_model.h"

namespace trident::planner {

// The work the data-parallel collectives of one iteration can hide under, on one rank.
struct DataParallelWork {
  int data = 1;
  int microbatches = 1;
  double parameter_floats = 0;       // Psi: this rank's chunks
  double bucket_floats = 0;          // a gradient bucket (the last one cannot overlap)
  double unit_floats = 0;            // ZeRO-3: the largest unit gathered at once (the first waits)
  double forward = 0, backward = 0;  // seconds of one micro-batch through this rank's chunks
};

struct DataParallelTraffic {
  double bytes = 0;    // sent by each rank per iteration
  double seconds = 0;  // every collective, on the ring model
  double exposed = 0;  // of those seconds, what no compute hides
};

DataParallelTraffic data_parallel_traffic(data_parallel::ShardingStrategy strategy,
                                          const DataParallelWork& work, const LinkSpec& link);

// ZeRO-3's gathered-unit working set: the unit in use and the one prefetched, taken as the two
// largest units (a layer; the embedding; the final norm with an untied output layer).
double gathered_working_set_floats(std::vector<double> unit_floats);

// The memory of a ZeRO-3 rank from its ZeRO-2 plan: every weight buffer (fp32 values and the
// 16-bit copy) sharded 1/d, plus the gathered working set held in the same formats.
// parameter_floats: the floats the plan's weight buffers hold (all of this rank's chunks).
MemoryBreakdown zero3_memory(MemoryBreakdown zero2, int data, double parameter_floats,
                             double working_set_floats);

}  // namespace trident::planner
