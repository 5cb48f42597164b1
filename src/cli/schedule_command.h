#pragma once
#include <string>
#include <vector>

namespace trident::cli {

// `trident schedule`: prints a pipeline schedule, simulates it (bubble per rank next to the
// analytic formula) and draws it as SVG or a Chrome trace.
int schedule_main(const std::vector<std::string>& args);

}  // namespace trident::cli
