#include "planner/sharding.h"

#include <algorithm>
#include <functional>

#include "planner/collectives.h"

namespace trident::planner {

namespace {

// trident moves gradients and weights between ranks as fp32, whatever the precision.
constexpr double kWireBytes = 4;

// The bytes a rank sends in a ring reduce-scatter or all-gather of `bytes`.
double ring_half_bytes(double bytes, int ranks) {
  return ranks > 1 ? (double)(ranks - 1) / ranks * bytes : 0;
}

// At least the last bucket of a collective over `floats` cannot overlap (nothing is left to
// compute when it starts).
double last_part(double seconds, double part_floats, double floats) {
  return seconds * std::min(1.0, part_floats / std::max(floats, 1.0));
}

DataParallelTraffic zero3_traffic(const DataParallelWork& w, const LinkSpec& link) {
  const double buffer = w.parameter_floats * kWireBytes;
  const double gather = ring_all_gather_seconds(buffer, w.data, link);
  const double scatter = ring_reduce_scatter_seconds(buffer, w.data, link);
  // Each micro-batch: the forward's gathers run ahead of it (prefetch), except the first
  // unit's; the backward's gathers and the reduce-scatters run under the backward, except the
  // last bucket's reduction.
  const double forward =
      std::max(gather - w.forward, last_part(gather, w.unit_floats, w.parameter_floats));
  const double backward = std::max(gather + scatter - w.backward,
                                   last_part(scatter, w.bucket_floats, w.parameter_floats));
  DataParallelTraffic t;
  t.bytes = w.microbatches * 3 * ring_half_bytes(buffer, w.data);
  t.seconds = w.microbatches * (2 * gather + scatter);
  t.exposed = w.microbatches * (forward + backward);
  return t;
}

DataParallelTraffic zero2_traffic(const DataParallelWork& w, const LinkSpec& link) {
  const double buffer = w.parameter_floats * kWireBytes;
  const double gather = ring_all_gather_seconds(buffer, w.data, link);
  const double scatter = ring_reduce_scatter_seconds(buffer, w.data, link);
  // Every micro-batch's reductions complete before the next micro-batch starts
  // (GradientReducer::finish_micro_batch): each hides under its own backward, less its last
  // bucket; the updated values are gathered during the next forward (--overlap-param-gather).
  const double per_microbatch =
      std::max(scatter - w.backward, last_part(scatter, w.bucket_floats, w.parameter_floats));
  DataParallelTraffic t;
  t.bytes = (w.microbatches + 1) * ring_half_bytes(buffer, w.data);
  t.seconds = w.microbatches * scatter + gather;
  t.exposed = w.microbatches * per_microbatch + std::max(gather - w.forward, 0.0);
  return t;
}

// no_shard and optim: one reduction of the accumulated gradients in the last backward.
DataParallelTraffic unsharded_gradient_traffic(bool distributed_optimizer,
                                               const DataParallelWork& w, const LinkSpec& link) {
  const double buffer = w.parameter_floats * kWireBytes;
  double seconds = 0, hide = 0;
  if (distributed_optimizer) {
    // Reduce-scatter the gradients during the last backward, all-gather the updated values
    // during the next forward (--overlap-grad-reduce --overlap-param-gather).
    seconds = ring_reduce_scatter_seconds(buffer, w.data, link) +
              ring_all_gather_seconds(buffer, w.data, link);
    hide = w.backward + w.forward;
  } else {
    seconds = ring_all_reduce_seconds(buffer, w.data, link);
    hide = w.backward;
  }
  DataParallelTraffic t;
  t.bytes = 2 * ring_half_bytes(buffer, w.data);
  t.seconds = seconds;
  t.exposed = std::max(seconds - hide, last_part(seconds, w.bucket_floats, w.parameter_floats));
  return t;
}

}  // namespace

DataParallelTraffic data_parallel_traffic(data_parallel::ShardingStrategy strategy,
                                          const DataParallelWork& work, const LinkSpec& link) {
  if (work.data < 2) return {};
  switch (strategy) {
    case data_parallel::ShardingStrategy::kNoShard:
      return unsharded_gradient_traffic(false, work, link);
    case data_parallel::ShardingStrategy::kOptim:
      return unsharded_gradient_traffic(true, work, link);
    case data_parallel::ShardingStrategy::kOptimGrads:
      return zero2_traffic(work, link);
    case data_parallel::ShardingStrategy::kOptimGradsParams:
      return zero3_traffic(work, link);
  }
  return {};
}

double gathered_working_set_floats(std::vector<double> units) {
  std::sort(units.begin(), units.end(), std::greater<>());
  double floats = 0;
  for (size_t i = 0; i < std::min<size_t>(2, units.size()); ++i) floats += units[i];
  return floats;
}

MemoryBreakdown zero3_memory(MemoryBreakdown zero2, int data, double parameter_floats,
                             double working_set_floats) {
  // The plan's weight buffers hold every parameter once in each format (4 bytes in fp32,
  // 6 with the bf16 or fp16 copy); the shard keeps 1/d of them, the working set all formats
  // of the gathered units (an estimate until training builds ZeRO-3 and plans it itself).
  const double bytes_per_float = zero2.weights / std::max(parameter_floats, 1.0);
  const double working_set = std::min(working_set_floats, parameter_floats);
  zero2.weights = zero2.weights / data + working_set * bytes_per_float;
  return zero2;
}

}  // namespace trident::planner
