#include "cli/mpi_job.h"

#include <algorithm>
#include <iostream>
#include <sstream>
#include <thread>

#include "checkpoint/checkpoint.h"
#include "core/files.h"

namespace trident::cli {

int default_threads(const std::vector<std::string>& nodes, int world_rank) {
  int local = 0;
  for (const std::string& n : nodes) local += n == nodes[world_rank];
  // A rank bound to fewer CPUs than its share (mpirun binds 1 or 2 ranks to a core each)
  // runs one thread per CPU it may use.
  const int share = (int)std::thread::hardware_concurrency() / std::max(1, local);
  return std::max(1, std::min(share, cpu_count(allowed_cpus())));
}

bool parse_quietly_off_rank_0(const comm::MpiRuntime& mpi, const std::function<bool()>& parse) {
  std::ostringstream quiet;
  std::streambuf* saved_err = mpi.world_rank() ? std::cerr.rdbuf(quiet.rdbuf()) : nullptr;
  std::streambuf* saved_out = mpi.world_rank() ? std::cout.rdbuf(quiet.rdbuf()) : nullptr;
  const bool ok = parse();
  if (saved_err) std::cerr.rdbuf(saved_err), std::cout.rdbuf(saved_out);
  return ok;
}

RankSetup::RankSetup(const comm::MpiRuntime& mpi, int tensor, int pipeline,
                     const LaunchOptions& launch)
    : grid(mpi.world_size(), tensor, pipeline, launch.expert_model_parallel_size,
           launch.expert_tensor_parallel_size, launch.context_parallel_size),
      context{mpi.world_rank(), &grid, nullptr, mpi.node_names()} {
  context.node_cores = physical_cores(mpi.node_cpus(context.nodes));
  const std::string across = grid.tensor_group_across_nodes(context.nodes);
  if (!across.empty() && !launch.allow_tensor_parallel_across_nodes)
    throw LayoutError("--tensor-model-parallel-size " + std::to_string(tensor) + ": " + across +
                      "; tensor parallelism all-reduces 4 times per layer and wants one node: "
                      "give each host a multiple of " +
                      std::to_string(tensor) +
                      " consecutive ranks (hostfile slots=, mpirun --map-by slot), or pass "
                      "--allow-tensor-parallel-across-nodes");
  std::shared_ptr<comm::Watchdog> watchdog;
  if (launch.distributed_timeout_minutes > 0 && mpi.world_size() > 1)
    watchdog = std::make_shared<comm::Watchdog>(launch.distributed_timeout_minutes * 60,
                                                launch.command, context.nodes);
  groups = distributed::make_mpi_groups(grid, mpi.world_rank(), std::move(watchdog));
  context.groups = &groups;
}

int run_job(const comm::MpiRuntime& mpi, const std::string& command,
            const std::function<int()>& body) {
  try {
    return body();
  } catch (const LayoutError& e) {
    if (mpi.world_rank() == 0) std::cerr << command << ": " << e.what() << std::endl;
    return 2;
  } catch (const FormatError& e) {
    return fail_job(mpi, command, 2, e.what());
  } catch (const checkpoint::CheckpointError& e) {
    return fail_job(mpi, command, 2, e.what());
  } catch (const std::invalid_argument& e) {
    return fail_job(mpi, command, 2, e.what());
  } catch (const std::exception& e) {
    return fail_job(mpi, command, 1, std::string("error: ") + e.what());
  }
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
