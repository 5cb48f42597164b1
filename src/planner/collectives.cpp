#include "planner/collectives.h"

namespace trident::planner {

namespace {
double seconds(double bytes, double steps, const LinkSpec& link) {
  return bytes / (link.bandwidth_gbs * 1e9) + steps * link.latency_us * 1e-6;
}
}  // namespace

double ring_all_reduce_seconds(double bytes, int ranks, const LinkSpec& link) {
  if (ranks <= 1) return 0;
  return seconds(2.0 * (ranks - 1) / ranks * bytes, 2.0 * (ranks - 1), link);
}

double ring_reduce_scatter_seconds(double bytes, int ranks, const LinkSpec& link) {
  if (ranks <= 1) return 0;
  return seconds((double)(ranks - 1) / ranks * bytes, ranks - 1, link);
}

double ring_all_gather_seconds(double bytes, int ranks, const LinkSpec& link) {
  return ring_reduce_scatter_seconds(bytes, ranks, link);
}

double all_to_all_seconds(double bytes, int ranks, const LinkSpec& link) {
  if (ranks <= 1) return 0;
  return seconds((double)(ranks - 1) / ranks * bytes, ranks - 1, link);
}

double point_to_point_seconds(double bytes, const LinkSpec& link) {
  return seconds(bytes, 1, link);
}

const LinkSpec& group_link(const Cluster& c, long ranks, long stride) {
  // Megatron's grid puts every group's ranks at a fixed stride; node boundaries fall at
  // multiples of devices_per_node, so the group stays inside one node exactly when its
  // span does and the span divides a node.
  const long span = (ranks - 1) * stride + 1, node = c.devices_per_node;
  const bool inside = ranks <= 1 || (span <= node && node % (ranks * stride) == 0);
  return inside ? c.intra_node : c.inter_node;
}

}  // namespace trident::planner
