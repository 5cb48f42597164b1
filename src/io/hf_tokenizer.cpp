#include "io/hf_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/files.h"
#include "tokenizer/huggingface_tokenizer.h"

namespace trident::io {

namespace fs = std::filesystem;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError(path + ": cannot read the tokenizer file");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

void save_hf_gpt2_tokenizer(const std::string& dir, const std::string& vocab_file,
                            const std::string& merge_file, int model_max_length) {
  const std::string vocab = read_file(vocab_file), merges = read_file(merge_file);
  fs::create_directories(dir);
  const fs::path d(dir);
  write_file_atomically((d / "vocab.json").string(), vocab);
  write_file_atomically((d / "merges.txt").string(), merges);
  const char* eot = "<|endoftext|>";
  const nlohmann::ordered_json special = {
      {"bos_token", eot}, {"eos_token", eot}, {"unk_token", eot}};
  nlohmann::ordered_json config = {{"tokenizer_class", "GPT2Tokenizer"},
                                   {"model_max_length", model_max_length},
                                   {"add_prefix_space", false}};
  config.update(special);
  write_file_atomically((d / "tokenizer_config.json").string(), config.dump(2) + "\n");
  write_file_atomically((d / "special_tokens_map.json").string(), special.dump(2) + "\n");
}

void save_hf_tokenizer_json(const std::string& dir, const std::string& tokenizer_model) {
  const tokenizer::HfTokenizerFiles files = tokenizer::find_hf_tokenizer_files(tokenizer_model);
  const std::string json = read_file(files.tokenizer_json);
  const std::string config =
      files.tokenizer_config.empty() ? "" : read_file(files.tokenizer_config);
  fs::create_directories(dir);
  write_file_atomically((fs::path(dir) / "tokenizer.json").string(), json);
  if (!files.tokenizer_config.empty())
    write_file_atomically((fs::path(dir) / "tokenizer_config.json").string(), config);
}

}  // namespace trident::io
