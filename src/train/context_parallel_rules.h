#pragma once
// The rules of context parallelism (--context-parallel-size, --cp-comm-type): the sequence
// splits into 2c equal chunks, all-to-all needs the heads to split over c, and what trident
// does not build with c > 1 yet is refused by name.
#include <string>
#include <vector>

namespace trident::train {

struct TrainingConfig;

// Appends one message per broken rule, each naming its flag(s).
void check_context_parallel(const TrainingConfig& c, std::vector<std::string>& errors);

}  // namespace trident::train
