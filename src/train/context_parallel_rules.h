#pragma once
// The rules of context parallelism (--context-parallel-size, --cp-comm-type) for training's
// config: the flag's value, then context_parallel/rules.h (the rules the planner and the memory
// check's remedies apply too).
#include <string>
#include <vector>

namespace trident::train {

struct TrainingConfig;

// Appends one message per broken rule, each naming its flag(s).
void check_context_parallel(const TrainingConfig& c, std::vector<std::string>& errors);

}  // namespace trident::train
