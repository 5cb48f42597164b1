#pragma once
#include <string>
#include <vector>

namespace trident::cli {

// `trident plan`: the PTD-P performance model over a described cluster — ranks every valid
// (t, p, d, b, v, recomputation, distributed optimizer) by predicted time per iteration,
// explains the best, estimates the training time, and with --launch runs it here.
int plan_main(const std::vector<std::string>& args);

}  // namespace trident::cli
