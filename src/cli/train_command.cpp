#include "cli/train_command.h"

#include <iostream>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "cli/mpi_job.h"
#include "comm/mpi_communicator.h"
#include "core/files.h"
#include "core/first_touch.h"
#include "core/stop_signals.h"
#include "data/indexed_dataset.h"
#include "train/memory_check.h"
#include "train/output_paths.h"
#include "train/trainer.h"

namespace trident::cli {

namespace {

int fail(const comm::MpiRuntime& mpi, int code, const std::string& message) {
  return fail_job(mpi, "trident train", code, message);
}

}  // namespace

int train_main(const std::vector<std::string>& args) {
  // Before MPI starts its threads, which inherit the mask (core/stop_signals.h); the flags
  // that may release the signals are read only once MPI runs.
  StopSignals::hold();
  comm::MpiRuntime mpi(nullptr, nullptr);
  train::TrainingConfig config;
  config.world_size = mpi.world_size();
  int code = 0;
  // Every rank parses and validates the same arguments; only rank 0 speaks.
  if (!parse_quietly_off_rank_0(mpi, [&] { return parse_train_args(args, &config, &code); }))
    return code;
  try {
    LaunchOptions launch;
    launch.command = "trident train";
    launch.distributed_timeout_minutes = config.distributed_timeout_minutes;
    launch.allow_tensor_parallel_across_nodes = config.allow_tensor_parallel_across_nodes;
    launch.expert_model_parallel_size = config.expert_model_parallel_size;
    launch.expert_tensor_parallel_size =
        config.model.moe.enabled() ? config.expert_tensor_parallel() : 0;
    launch.context_parallel_size = config.context_parallel_size;
    RankSetup setup(mpi, config.tensor_model_parallel_size, config.pipeline_model_parallel_size,
                    launch);
    if (config.threads == 0)
      config.threads = default_threads(setup.context.nodes, mpi.world_rank());
    if (config.no_huge_pages) disable_huge_pages();
    std::ostringstream discard;
    std::ostream& log = mpi.world_rank() == 0 ? std::cout : discard;
    // A signal during start-up (held since the start) stops after step 1.
    const StopSignals signals(config.exit_signal_handler);
    // Before anything is built: exit 2 in seconds. One rank checks (checks of one path by
    // several processes would race), and its refusal ends the job.
    if (mpi.world_rank() == 0) train::check_output_paths(config);
    code = train::run_training(config, setup.context, log, signals);
    if (code == train::kExitEveryStepSkipped) {
      // Every rank skipped alike (the overflow is reduced over the world): no abort needed.
      if (mpi.world_rank() == 0)
        std::cerr << "trident train: no step updated the weights (fp16 overflow at every "
                     "iteration, see the error above); exit "
                  << code << std::endl;
      return code;
    }
    if (code != 0) return fail(mpi, code, "training stopped");
    return 0;
  } catch (const LayoutError& e) {
    if (mpi.world_rank() == 0) std::cerr << "trident train: " << e.what() << std::endl;
    return 2;
  } catch (const train::MemoryRefused& e) {
    // Every rank refuses alike: rank 0 reports, all exit 2 and MPI finalizes normally.
    if (mpi.world_rank() == 0) std::cerr << "trident train: " << e.what() << std::endl;
    return 2;
  } catch (const FormatError& e) {
    return fail(mpi, 2, e.what());
  } catch (const data::DatasetError& e) {
    return fail(mpi, 2, e.what());
  } catch (const checkpoint::CheckpointError& e) {
    return fail(mpi, 2, e.what());
  } catch (const std::exception& e) {
    return fail(mpi, 1, std::string("error: ") + e.what());
  }
}

}  // namespace trident::cli
