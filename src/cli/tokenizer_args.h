#pragma once
// The tokenizer flags every text-reading command shares (Megatron's names):
// --tokenizer-type, --tokenizer-model, --vocab-file, --merge-file.
#include <CLI/CLI.hpp>
#include <string>

#include "tokenizer/build_tokenizer.h"

namespace trident::cli {

// gpt2_default: how the command finds GPT-2's files when they are not given ("" if it
// does not), appended to their help.
void add_tokenizer_args(CLI::App& app, tokenizer::TokenizerOptions* o, const std::string& group,
                        const std::string& gpt2_default = "");

}  // namespace trident::cli
