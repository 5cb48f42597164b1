#pragma once
// What every command that runs under mpirun needs: threads per rank and a way to fail that
// ends the whole job (no rank waits forever in a collective for one that is gone).
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "distributed/process_grid.h"
#include "distributed/process_groups.h"
#include "engine/rank_context.h"

namespace trident::cli {

// Ranks sharing this rank's node split its cores between them.
int default_threads(const std::vector<std::string>& nodes, int world_rank);

// Runs `parse` on every rank (all must agree on the arguments) with only rank 0's output
// shown; returns what it returns.
bool parse_quietly_off_rank_0(const comm::MpiRuntime& mpi, const std::function<bool()>& parse);

// How the ranks are placed and watched: flags train, generate and serve share.
struct LaunchOptions {
  std::string command = "trident";         // prefixes the hang report
  double distributed_timeout_minutes = 0;  // 0: no watchdog (waits block in MPI)
  bool allow_tensor_parallel_across_nodes = false;
  int expert_model_parallel_size = 1;   // EP (MoE): splits each data-parallel group
  int expert_tensor_parallel_size = 0;  // ETP (MoE; 0: t): the expert grid's tensor size
  int context_parallel_size = 1;        // c: the grid's cp axis (training)
};

// A layout every rank refuses alike (so rank 0 alone reports it and none aborts).
struct LayoutError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// This rank's place in a t x p (x the rest data-parallel) grid over the world, its groups, and
// the context that points at both (so it lives on the heap and never moves). Throws
// LayoutError when a tensor group would span nodes and the options do not allow it.
struct RankSetup {
  distributed::ProcessGrid grid;
  distributed::ProcessGroups groups;
  engine::RankContext context;
  RankSetup(const comm::MpiRuntime& mpi, int tensor, int pipeline,
            const LaunchOptions& launch = {});
};

// Runs body; a LayoutError is reported by rank 0 and returns 2 on every rank; any other
// exception ends the job through fail_job: bad input (FormatError,
// checkpoint::CheckpointError, std::invalid_argument) with exit code 2, anything else with 1.
int run_job(const comm::MpiRuntime& mpi, const std::string& command,
            const std::function<int()>& body);

// Prints "<command>: [rank N: ]message", then MPI_Abort when there are other ranks.
int fail_job(const comm::MpiRuntime& mpi, const std::string& command, int code,
             const std::string& message);

}  // namespace trident::cli
