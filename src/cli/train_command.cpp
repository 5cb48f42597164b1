#include "cli/train_command.h"

#include <iostream>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "cli/mpi_job.h"
#include "comm/mpi_communicator.h"
#include "data/indexed_dataset.h"
#include "io/safetensors.h"
#include "train/trainer.h"

namespace trident::cli {

namespace {

int fail(const comm::MpiRuntime& mpi, int code, const std::string& message) {
  return fail_job(mpi, "trident train", code, message);
}

}  // namespace

int train_main(const std::vector<std::string>& args) {
  comm::MpiRuntime mpi(nullptr, nullptr);
  TrainingConfig config;
  config.world_size = mpi.world_size();
  int code = 0;
  {
    // Every rank parses and validates the same arguments; only rank 0 speaks.
    std::ostringstream quiet;
    std::streambuf* saved_err = mpi.world_rank() ? std::cerr.rdbuf(quiet.rdbuf()) : nullptr;
    std::streambuf* saved_out = mpi.world_rank() ? std::cout.rdbuf(quiet.rdbuf()) : nullptr;
    bool ok = parse_train_args(args, &config, &code);
    if (saved_err) std::cerr.rdbuf(saved_err), std::cout.rdbuf(saved_out);
    if (!ok) return code;
  }
  try {
    std::vector<std::string> nodes = mpi.node_names();
    if (config.threads == 0) config.threads = default_threads(nodes, mpi.world_rank());
    distributed::ProcessGrid grid(mpi.world_size(), config.tensor_model_parallel_size,
                                  config.pipeline_model_parallel_size);
    distributed::ProcessGroups groups = distributed::make_mpi_groups(grid, mpi.world_rank());
    RankContext rank{mpi.world_rank(), &grid, &groups, nodes};
    std::ostringstream discard;
    std::ostream& log = mpi.world_rank() == 0 ? std::cout : discard;
    code = run_training(config, rank, log);
    if (code != 0) return fail(mpi, code, "training stopped");
    return 0;
  } catch (const io::FormatError& e) {
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
