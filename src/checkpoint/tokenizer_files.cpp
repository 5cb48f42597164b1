#include "checkpoint/tokenizer_files.h"

#include <xxhash.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint/manifest.h"
#include "core/files.h"
#include "tokenizer/huggingface_tokenizer.h"

namespace trident::checkpoint {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

namespace {

std::string read_bytes(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError(what + " " + path + ": cannot read the tokenizer file");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// A name from a manifest stays a plain file name inside the tokenizer folder.
bool plain_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

}  // namespace

std::string TokenizerRecord::path_of(const std::string& flag) const {
  for (const TokenizerFile& f : files)
    if (f.flag == flag) return f.path;
  return "";
}

TokenizerRecord tokenizer_record(const tokenizer::TokenizerOptions& o) {
  TokenizerRecord record;
  if (!o.given()) return record;
  record.type = o.tokenizer_type;
  if (o.sentencepiece()) {
    record.files = {{"--tokenizer-model", o.tokenizer_model, "tokenizer.model"}};
  } else if (o.huggingface()) {
    // tokenizer.json first: the copy --tokenizer-model names; its config beside it.
    const tokenizer::HfTokenizerFiles hf = tokenizer::find_hf_tokenizer_files(o.tokenizer_model);
    record.files = {{"--tokenizer-model", hf.tokenizer_json, "tokenizer.json"}};
    if (!hf.tokenizer_config.empty())
      record.files.push_back({"--tokenizer-model", hf.tokenizer_config, "tokenizer_config.json"});
  } else {
    record.files = {{"--vocab-file", o.vocab_file, "vocab.json"},
                    {"--merge-file", o.merge_file, "merges.txt"}};
  }
  return record;
}

tokenizer::TokenizerOptions tokenizer_options(const TokenizerRecord& record) {
  tokenizer::TokenizerOptions o;
  o.tokenizer_type = record.type;
  o.tokenizer_model = record.path_of("--tokenizer-model");
  o.vocab_file = record.path_of("--vocab-file");
  o.merge_file = record.path_of("--merge-file");
  return o;
}

std::string xxh64_hex(const std::string& bytes) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                (unsigned long long)XXH64(bytes.data(), bytes.size(), 0));
  return hex;
}

json save_tokenizer_files(const TokenizerRecord& tokenizer, const std::string& checkpoint_dir) {
  const fs::path folder = fs::path(checkpoint_dir) / kTokenizerFolder;
  fs::create_directories(folder);
  json files = json::array();
  for (const TokenizerFile& f : tokenizer.files) {
    const std::string bytes = read_bytes(f.path, f.flag);
    write_file_atomically((folder / f.name).string(), bytes);
    files.push_back({{"flag", f.flag},
                     {"file", f.name},
                     {"bytes", (long)bytes.size()},
                     {"xxh64", xxh64_hex(bytes)}});
  }
  fsync_directory(folder.string());
  return {{"type", tokenizer.type}, {"files", files}};
}

TokenizerRecord read_tokenizer_files(const json& manifest, const std::string& checkpoint_dir) {
  TokenizerRecord record;
  if (!manifest.contains("tokenizer")) return record;
  const std::string where = (fs::path(checkpoint_dir) / "manifest.json").string() + ": tokenizer";
  const json& t = manifest["tokenizer"];
  if (!t.is_object() || !t.contains("type") || !t["type"].is_string() || !t.contains("files") ||
      !t["files"].is_array())
    throw CheckpointError(where + " must be an object with a string \"type\" and \"files\"");
  record.type = t["type"].get<std::string>();
  for (const json& f : t["files"]) {
    if (!f.is_object() || !f.contains("flag") || !f["flag"].is_string() || !f.contains("file") ||
        !f["file"].is_string() || !plain_name(f["file"].get<std::string>()) ||
        !f.contains("bytes") || !f["bytes"].is_number_integer() || !f.contains("xxh64") ||
        !f["xxh64"].is_string())
      throw CheckpointError(where +
                            ": each file needs a string flag, a plain file name, "
                            "integer bytes and a string xxh64; got " +
                            f.dump());
    const fs::path path =
        fs::path(checkpoint_dir) / kTokenizerFolder / f["file"].get<std::string>();
    const std::string bytes = read_bytes(path.string(), "tokenizer file");
    if ((long)bytes.size() != f["bytes"].get<long>() || xxh64_hex(bytes) != f["xxh64"])
      throw CheckpointError(path.string() + ": " + std::to_string(bytes.size()) +
                            " bytes with xxh64 " + xxh64_hex(bytes) + ", the manifest says " +
                            f["bytes"].dump() + " bytes with xxh64 " + f["xxh64"].dump());
    record.files.push_back(
        {f["flag"].get<std::string>(), path.string(), f["file"].get<std::string>()});
  }
  return record;
}

}  // namespace trident::checkpoint
