#pragma once
// Where this rank sits: its place in the grid, its groups, and every rank's node name.
// Everything that runs a model on a rank (train, and later generate, serve, eval) gets one.
#include <string>
#include <vector>

#include "distributed/process_grid.h"
#include "distributed/process_groups.h"

namespace trident::engine {

struct RankContext {
  int world_rank = 0;
  const distributed::ProcessGrid* grid = nullptr;
  distributed::ProcessGroups* groups = nullptr;
  std::vector<std::string> nodes;
  int node_cores = 0;  // physical cores this node's ranks may run on together (0: unknown)
};

}  // namespace trident::engine
