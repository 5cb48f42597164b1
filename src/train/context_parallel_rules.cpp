#include "train/context_parallel_rules.h"

#include "context_parallel/rules.h"
#include "train/training_config.h"

namespace trident::train {

void check_context_parallel(const TrainingConfig& c, std::vector<std::string>& errors) {
  const std::optional<context_parallel::CpCommType> type =
      context_parallel::parse_cp_comm_type(c.cp_comm_type);
  if (c.context_parallel_size >= 1 && !type) {
    errors.push_back("--cp-comm-type must be p2p, a2a or allgather (got '" + c.cp_comm_type + "')");
    return;
  }
  context_parallel::check_context_parallel(
      c.model, c.tensor_model_parallel_size, c.context_parallel_size,
      type.value_or(context_parallel::CpCommType::kP2p), errors);
}

}  // namespace trident::train
