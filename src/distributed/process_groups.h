#pragma once
// The communicators of one rank, built from the grid: every rank creates every group.
#include <memory>

#include "comm/communicator.h"
#include "comm/watchdog.h"
#include "distributed/process_grid.h"

namespace trident::distributed {

struct ProcessGroups {
  std::unique_ptr<comm::Communicator> world;
  std::unique_ptr<comm::Communicator> tensor;
  // The ranks holding the same weights, over which their gradients are reduced, the
  // distributed optimizer and ZeRO shard, and checkpoints split their writes: the d x c ranks
  // of Megatron's data-parallel group with context parallel (ranked cp + c * dp), the
  // data-parallel group itself at c = 1.
  std::unique_ptr<comm::Communicator> data;
  std::unique_ptr<comm::Communicator> pipeline;
  // Context parallelism (context_parallel/context_parallel.h): the c ranks holding the chunks
  // of the same sequences; and the d data-parallel replicas of this rank's cp rank
  // (Megatron's data-parallel group proper), over which the samples are dealt. At c = 1
  // `context` has one rank and `replicas` the members of `data`.
  std::unique_ptr<comm::Communicator> context;
  std::unique_ptr<comm::Communicator> replicas;
  // Expert parallelism (process_grid.h): the MoE dispatcher's all-to-all goes over `expert`;
  // `expert_data` holds the ranks with the same experts. One-rank groups without EP.
  std::unique_ptr<comm::Communicator> expert;
  std::unique_ptr<comm::Communicator> expert_data;
  // The t x p ranks of this rank's data-parallel replica (and cp rank: each holds a whole
  // model copy), ranked pipeline-major then tensor (so its rank 0 is (tensor 0, pipeline 0)):
  // inference commands go over it.
  std::unique_ptr<comm::Communicator> model;
  // Watches every wait on the groups above (--distributed-timeout-minutes); null: none.
  std::shared_ptr<comm::Watchdog> watchdog;
};

// Over MPI_COMM_WORLD (MPI must be initialised). A watchdog, when given, watches every group.
ProcessGroups make_mpi_groups(const ProcessGrid& grid, int world_rank,
                              std::shared_ptr<comm::Watchdog> watchdog = nullptr);
// One-rank groups, for one process without MPI.
ProcessGroups make_single_rank_groups();

}  // namespace trident::distributed
