#pragma once
#include <string>
#include <vector>

namespace trident::cli {

// `trident inspect-data --data-path PREFIX`: a summary line (JSON) of an indexed dataset
// and, with --count, its sequences as JSON lists (optionally decoded to text).
int inspect_data_main(const std::vector<std::string>& args);

}  // namespace trident::cli
