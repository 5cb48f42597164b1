#pragma once
// The tokenizer a checkpoint carries, so it generates, evaluates and converts on its own:
// its files are copied into <checkpoint>/tokenizer/ and listed in the manifest's "tokenizer"
// entry (--tokenizer-type, and each file's flag, name, size and xxh64 checksum).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/build_tokenizer.h"

namespace trident::checkpoint {

// The folder inside a checkpoint directory that holds the tokenizer's files.
inline constexpr const char* kTokenizerFolder = "tokenizer";

struct TokenizerFile {
  std::string flag;  // the flag that names it: --vocab-file, --merge-file, --tokenizer-model
  std::string path;  // where it is: the source when saving, the copy when read back
  std::string name;  // its name inside the tokenizer folder ("vocab.json")
};

struct TokenizerRecord {
  std::string type;  // --tokenizer-type
  std::vector<TokenizerFile> files;
  bool empty() const { return files.empty(); }
  // The copy of the file that `flag` names; "" when the record has none.
  std::string path_of(const std::string& flag) const;
};

// Copies the record's files into <checkpoint_dir>/tokenizer/ (each durably) and returns the
// manifest's "tokenizer" entry. Throws CheckpointError naming a file that cannot be read.
nlohmann::ordered_json save_tokenizer_files(const TokenizerRecord& tokenizer,
                                            const std::string& checkpoint_dir);

// The tokenizer a checked manifest records, its paths inside checkpoint_dir, every file
// checked against the manifest's size and checksum (CheckpointError naming the file and the
// difference). Empty when the checkpoint carries none (saved without a tokenizer).
TokenizerRecord read_tokenizer_files(const nlohmann::ordered_json& manifest,
                                     const std::string& checkpoint_dir);

// The files a run's tokenizer flags name, under the names HuggingFace gives them (GPT-2:
// vocab.json, merges.txt; SentencePiece: tokenizer.model; HuggingFace: tokenizer.json and,
// when beside it, tokenizer_config.json). Empty when the flags name none.
TokenizerRecord tokenizer_record(const tokenizer::TokenizerOptions& options);
// The tokenizer flags that build the recorded tokenizer from its copies.
tokenizer::TokenizerOptions tokenizer_options(const TokenizerRecord& record);

// The xxh64 of a file's bytes as 16 hex digits, as the manifest writes every checksum.
std::string xxh64_hex(const std::string& bytes);

}  // namespace trident::checkpoint
