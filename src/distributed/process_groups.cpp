#include "distributed/process_groups.h"

#include "comm/mpi_communicator.h"

namespace trident::distributed {

namespace {
std::unique_ptr<comm::Communicator> split(int colour, int key, const char* name) {
  MPI_Comm c;
  MPI_Comm_split(MPI_COMM_WORLD, colour, key, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  return std::make_unique<comm::MpiCommunicator>(c, name);
}
}  // namespace

ProcessGroups make_mpi_groups(const ProcessGrid& grid, int rank) {
  GridCoords c = grid.coords(rank);
  ProcessGroups g;
  g.world = split(0, rank, "world");
  g.tensor = split(grid.tensor_group_index(rank), c.tp, "tensor");
  g.data = split(grid.data_group_index(rank), c.dp, "data");
  g.pipeline = split(grid.pipeline_group_index(rank), c.pp, "pipeline");
  g.model = split(grid.model_group_index(rank), c.tp + grid.tensor_size() * c.pp, "model");
  return g;
}

ProcessGroups make_single_rank_groups() {
  ProcessGroups g;
  g.world = std::make_unique<comm::SingleRankCommunicator>("world");
  g.tensor = std::make_unique<comm::SingleRankCommunicator>("tensor");
  g.data = std::make_unique<comm::SingleRankCommunicator>("data");
  g.pipeline = std::make_unique<comm::SingleRankCommunicator>("pipeline");
  g.model = std::make_unique<comm::SingleRankCommunicator>("model");
  return g;
}

}  // namespace trident::distributed
