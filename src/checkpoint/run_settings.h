#pragma once
// The settings that shape a run (seed, batch sizes, sequence length, data, LR schedule),
// recorded in a checkpoint's manifest ("run") and compared on resume: changed silently, the
// run would become another one, so a resume that changes one is refused (Megatron's check
// of the checkpoint's arguments) unless asked for. Which settings these are is training's
// business (train/run_record.cpp); writing and comparing them is the checkpoint's.
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trident::checkpoint {

struct RunSetting {
  std::string key;               // in the manifest's "run" object
  std::string flag;              // the flag that sets it, for messages
  nlohmann::ordered_json value;  // this run's
};

// What a load takes from a checkpoint.
enum class LoadMode {
  kResume,          // everything; the run settings must equal this run's (exit 2 otherwise)
  kResumeOverride,  // everything; differing run settings are printed as warnings
  kWeightsOnly,     // --finetune, convert: the weights; iteration, optimizer and scaler afresh
};

// The manifest's "run" object.
nlohmann::ordered_json run_json(const std::vector<RunSetting>& settings);

// Each of this run's settings that differs from the checkpoint's, one line each. A setting
// only one side has (mock data has no split) is not compared.
std::vector<std::string> run_differences(const nlohmann::ordered_json& saved,
                                         const std::vector<RunSetting>& settings);

// Refuses (CheckpointError listing every difference) a resume that changes the run; with
// kResumeOverride prints the differences as warnings; kWeightsOnly compares nothing.
void check_run_settings(const nlohmann::ordered_json& manifest, const std::string& manifest_path,
                        const std::vector<RunSetting>& settings, LoadMode mode, std::ostream& log);

}  // namespace trident::checkpoint
