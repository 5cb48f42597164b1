#pragma once
// Time of one collective or message over a link, the bandwidth + latency (alpha-beta) model
// of a ring: an all-reduce of N bytes over n ranks moves 2 (n - 1) / n N bytes through
// every rank's link in 2 (n - 1) steps; reduce-scatter and all-gather half of that.
#include "planner/cluster.h"

namespace trident::planner {

double ring_all_reduce_seconds(double bytes, int ranks, const LinkSpec& link);
double ring_reduce_scatter_seconds(double bytes, int ranks, const LinkSpec& link);
double ring_all_gather_seconds(double bytes, int ranks, const LinkSpec& link);
// An all-to-all of `bytes` per rank spread evenly over its peers (the MoE dispatch): each
// rank keeps 1/n and sends the rest, one exchange with each of the n - 1 others.
double all_to_all_seconds(double bytes, int ranks, const LinkSpec& link);
double point_to_point_seconds(double bytes, const LinkSpec& link);

// The slowest link a group of `ranks` ranks, `stride` apart in the world's rank order,
// crosses: inside a node when the whole group fits one node's consecutive devices.
const LinkSpec& group_link(const Cluster& c, long ranks, long stride);

}  // namespace trident::planner
