#include "cli/mpi_job.h"

#include <algorithm>
#include <iostream>
#include <thread>

namespace trident::cli {

int default_threads(const std::vector<std::string>& nodes, int world_rank) {
  int local = 0;
  for (const std::string& n : nodes) local += n == nodes[world_rank];
  return std::max(1, (int)std::thread::hardware_concurrency() / std::max(1, local));
}

int fail_job(const comm::MpiRuntime& mpi, const std::string& command, int code,
             const std::string& message) {
  std::cerr << command << ": "
            << (mpi.world_size() > 1 ? "rank " + std::to_string(mpi.world_rank()) + ": " : "")
            << message << std::endl;
  if (mpi.world_size() > 1) comm::MpiRuntime::abort(code);
  return code;
}

}  // namespace trident::cli
