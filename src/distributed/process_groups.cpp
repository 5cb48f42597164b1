#include "distributed/process_groups.h"

#include "comm/mpi_communicator.h"

namespace trident::distributed {

namespace {
std::unique_ptr<comm::Communicator> split(int colour, int key, const char* name,
                                          const std::shared_ptr<comm::Watchdog>& watchdog) {
  MPI_Comm c;
  MPI_Comm_split(MPI_COMM_WORLD, colour, key, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  return std::make_unique<comm::MpiCommunicator>(c, name, watchdog);
}
}  // namespace

ProcessGroups make_mpi_groups(const ProcessGrid& grid, int rank,
                              std::shared_ptr<comm::Watchdog> watchdog) {
  GridCoords c = grid.coords(rank);
  ProcessGroups g;
  // The same order on every rank: the watchdog numbers groups by it.
  g.world = split(0, rank, "world", watchdog);
  g.tensor = split(grid.tensor_group_index(rank), c.tp, "tensor", watchdog);
  g.data = split(grid.data_context_group_index(rank), c.cp + grid.context_size() * c.dp, "data",
                 watchdog);
  g.pipeline = split(grid.pipeline_group_index(rank), c.pp, "pipeline", watchdog);
  g.context = split(grid.context_group_index(rank), c.cp, "context", watchdog);
  g.replicas = split(grid.data_group_index(rank), c.dp, "replicas", watchdog);
  g.model =
      split(grid.model_group_index(rank), c.tp + grid.tensor_size() * c.pp, "model", watchdog);
  g.expert = split(grid.expert_group_index(rank), grid.expert_rank(rank), "expert", watchdog);
  g.expert_data = split(grid.expert_data_group_index(rank), grid.expert_data_rank(rank),
                        "expert-data", watchdog);
  g.watchdog = std::move(watchdog);
  return g;
}

ProcessGroups make_single_rank_groups() {
  ProcessGroups g;
  g.world = std::make_unique<comm::SingleRankCommunicator>("world");
  g.tensor = std::make_unique<comm::SingleRankCommunicator>("tensor");
  g.data = std::make_unique<comm::SingleRankCommunicator>("data");
  g.pipeline = std::make_unique<comm::SingleRankCommunicator>("pipeline");
  g.context = std::make_unique<comm::SingleRankCommunicator>("context");
  g.replicas = std::make_unique<comm::SingleRankCommunicator>("replicas");
  g.model = std::make_unique<comm::SingleRankCommunicator>("model");
  g.expert = std::make_unique<comm::SingleRankCommunicator>("expert");
  g.expert_data = std::make_unique<comm::SingleRankCommunicator>("expert-data");
  return g;
}

}  // namespace trident::distributed
