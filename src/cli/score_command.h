#pragma once
#include <string>
#include <vector>

namespace trident::cli {

// `trident score --model DIR --tokens FILE`: mean next-token loss and perplexity.
int score_main(const std::vector<std::string>& args);

// Token sequences from a JSON file: a list of ids or a list of lists of ids.
std::vector<std::vector<int>> read_token_file(const std::string& path, int vocab_size);
// A UTF-8 text file as one sequence of GPT-2 ids.
std::vector<std::vector<int>> read_text_file(const std::string& path, const std::string& vocab,
                                             const std::string& merges, int vocab_size);

}  // namespace trident::cli
