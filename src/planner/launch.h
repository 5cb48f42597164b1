#pragma once
// `trident plan --launch`: the command that runs the best plan — mpirun, or srun inside a
// Slurm allocation — with every `trident train` flag the layout and the workload need.
#include <string>
#include <vector>

#include "planner/layout.h"

namespace trident::planner {

struct LaunchContext {
  std::string binary;                   // this trident executable
  std::vector<std::string> train_args;  // given after `--` (data, iterations, ...)
  bool slurm = false;                   // SLURM_JOB_ID is set
  bool root = false;                    // Open MPI's mpirun refuses root without a flag
};

std::vector<std::string> launch_command(const Layout& layout, const Workload& w,
                                        const LaunchContext& context);

// The command as one shell line, arguments quoted where needed.
std::string shell_line(const std::vector<std::string>& argv);

}  // namespace trident::planner
