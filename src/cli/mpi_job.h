#pragma once
// What every command that runs under mpirun needs: threads per rank and a way to fail that
// ends the whole job (no rank waits forever in a collective for one that is gone).
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"

namespace trident::cli {

// Ranks sharing this rank's node split its cores between them.
int default_threads(const std::vector<std::string>& nodes, int world_rank);

// Prints "<command>: [rank N: ]message", then MPI_Abort when there are other ranks.
int fail_job(const comm::MpiRuntime& mpi, const std::string& command, int code,
             const std::string& message);

}  // namespace trident::cli
