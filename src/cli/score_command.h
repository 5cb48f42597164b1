#pragma once
#include <string>
#include <vector>

#include "tokenizer/build_tokenizer.h"

namespace trident::cli {

// `trident score --load CKPT | --load-hf DIR --tokens FILE | --text FILE`: mean next-token
// loss and perplexity (--model is --load-hf's older name).
int score_main(const std::vector<std::string>& args);

// Token sequences from a JSON file: a list of ids or a list of lists of ids.
std::vector<std::vector<int>> read_token_file(const std::string& path, int vocab_size);
// A UTF-8 text file as one sequence of the tokenizer's ids.
std::vector<std::vector<int>> read_text_file(const std::string& path,
                                             const tokenizer::TokenizerOptions& options,
                                             int vocab_size);

}  // namespace trident::cli
