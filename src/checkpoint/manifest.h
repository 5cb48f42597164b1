#pragma once
// A checkpoint's manifest.json, read and checked on its own before anything in it is used:
// every key a load or a conversion reads is there with its type, numbers are in range, file
// names stay inside the checkpoint directory, and every tensor's shard agrees with its global
// and local shapes. What it says about the files (size, checksum, tensors) is checked against
// them by checkpoint::load.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "config/model_config.h"
#include "parameters/parameter_layout.h"

namespace trident::checkpoint {

constexpr int kFormatVersion = 1;
constexpr const char* kFormat = "trident-checkpoint";

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses and checks the text of a manifest.json; throws CheckpointError naming `path`, the
// key and the rule.
nlohmann::ordered_json parse_manifest(const std::string& text, const std::string& path);

// The manifest.json of the checkpoint directory `dir` (an iter_NNNNNNN), parsed and checked.
nlohmann::ordered_json read_manifest(const std::string& dir);

// The model recorded in a checked manifest.
ModelConfig manifest_model(const nlohmann::ordered_json& manifest);

// What the manifest says of the model and of a tensor, as save writes it and load compares it.
nlohmann::ordered_json model_json(const ModelConfig& model);
nlohmann::ordered_json spec_json(const ParamSpec& spec);

// LoRA: what identifies the base of a checkpoint of adapters, as save writes it under
// "lora_base": the --load-hf directory and the names and sizes of its config.json and
// *.safetensors files, or the seed the base was drawn from.
nlohmann::ordered_json lora_base_json(const LoraConfig& lora, std::uint64_t seed);
// Throws CheckpointError naming the directory when it is gone or its files differ.
void check_lora_base(const nlohmann::ordered_json& base, const std::string& manifest_path);

// One of a checked manifest's tensor entries: name, global and local shape, shard.
ParamSpec manifest_spec(const nlohmann::ordered_json& tensor);

}  // namespace trident::checkpoint
