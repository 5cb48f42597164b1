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

// Where a command finds its tokenizer when the flags name none, first that has one: the
// --load checkpoint's copy (CheckpointError when its files do not match the manifest), the
// --load-hf directory's (hf_directory_tokenizer), GPT-2's files in the installation's
// data/gpt2/ (core/install_paths.h). The flags are returned as given when they name files.
tokenizer::TokenizerOptions resolve_tokenizer(const tokenizer::TokenizerOptions& flags,
                                              const std::string& load = "",
                                              const std::string& load_hf = "");

// The tokenizer a HuggingFace model directory holds: its tokenizer.json (HuggingFaceTokenizer,
// which also reads tokenizer_config.json), else vocab.json and merges.txt (GPT-2); default
// options, given() false, when it holds neither.
tokenizer::TokenizerOptions hf_directory_tokenizer(const std::string& load_hf);

// The tokenizer the latest checkpoint under `load` carries (default options, given() false,
// when it carries none).
tokenizer::TokenizerOptions carried_tokenizer(const std::string& load);

// The help text of the tokenizer flags' default, as resolve_tokenizer finds it.
inline constexpr const char* kTokenizerDefaultHelp =
    "the --load checkpoint's, the --load-hf directory's, or the installation's data/gpt2/";

}  // namespace trident::cli
