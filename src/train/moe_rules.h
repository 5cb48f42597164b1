#pragma once
// The rules that tie a mixture-of-experts model to the run: expert parallelism against the
// data-parallel size, sequence parallelism under t > 1, the dispatcher and load-balancing
// choices trident implements, the loss coefficients (Megatron's checks, and trident's
// refusals by name of what it does not do). The shape's own rules are
// validate_moe_config's (config/model_config.h).
#include <string>
#include <vector>

namespace trident::train {

struct TrainingConfig;

// Appends one message per broken rule, each naming its flag(s).
void check_moe(const TrainingConfig& c, std::vector<std::string>& errors);

}  // namespace trident::train
