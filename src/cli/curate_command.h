#pragma once
#include <string>
#include <vector>

namespace trident::cli {

// `trident curate`: MT-NLG's data curation pipeline over JSONL (src/curation/pipeline.h), and
// `trident curate train-quality`, which trains its fastText quality classifier.
int curate_main(const std::vector<std::string>& args);

}  // namespace trident::cli
