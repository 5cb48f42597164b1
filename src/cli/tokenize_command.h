#pragma once
#include <string>
#include <vector>

namespace trident::cli {

// `trident tokenize`: GPT-2 BPE ids of a text file, or of every document of a JSONL file
// (one JSON list per line), or the text of ids with --decode.
int tokenize_main(const std::vector<std::string>& args);

}  // namespace trident::cli
