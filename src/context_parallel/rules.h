#pragma once
// The rules of context parallelism (--context-parallel-size, --cp-comm-type) as plain
// functions of the model and the layout: training's config check (train/context_parallel_rules),
// the planner's layout_violations and the memory check's remedies all ask these, so each rule
// is written once.
#include <optional>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "context_parallel/context_parallel.h"

namespace trident::context_parallel {

// "p2p", "a2a", "allgather" (Megatron's --cp-comm-type values), and back (nullopt: unknown).
std::string cp_comm_type_name(CpCommType type);
std::optional<CpCommType> parse_cp_comm_type(const std::string& name);

// Appends one message per broken rule, each naming its flag(s): c >= 1; at c > 1 the sequence
// splits into 2c equal chunks, all-to-all needs each tensor rank's query and key/value heads
// divisible by c, and what c > 1 does not build yet (MoE, LoRA) is refused by name.
void check_context_parallel(const ModelConfig& model, int tensor, int context, CpCommType type,
                            std::vector<std::string>& errors);

}  // namespace trident::context_parallel
