#pragma once
// trident convert --to gguf: a checkpoint (any layout, gathered as --save-hf gathers it) or a
// HuggingFace directory written as one GGUF file for llama.cpp (src/deploy/).
#include <string>

#include "tokenizer/build_tokenizer.h"

namespace trident::cli {

struct GgufExportFlags {
  std::string load, load_hf;  // exactly one
  std::string output;         // the .gguf file
  std::string outtype = "f16";
};

// Checks the flags and the model before reading any weight, then writes the file; throws
// FormatError naming the flag or the rule (exit 2), CheckpointError for a damaged checkpoint.
void export_gguf(const GgufExportFlags& f, const tokenizer::TokenizerOptions& tokenizer_flags);

}  // namespace trident::cli
