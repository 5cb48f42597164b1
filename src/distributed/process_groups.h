#pragma once
// The communicators of one rank, built from the grid: every rank creates every group.
#include <memory>

#include "comm/communicator.h"
#include "distributed/process_grid.h"

namespace trident::distributed {

struct ProcessGroups {
  std::unique_ptr<comm::Communicator> world;
  std::unique_ptr<comm::Communicator> tensor;
  std::unique_ptr<comm::Communicator> data;
  std::unique_ptr<comm::Communicator> pipeline;
};

// Over MPI_COMM_WORLD (MPI must be initialised).
ProcessGroups make_mpi_groups(const ProcessGrid& grid, int world_rank);
// One-rank groups, for one process without MPI.
ProcessGroups make_single_rank_groups();

}  // namespace trident::distributed
