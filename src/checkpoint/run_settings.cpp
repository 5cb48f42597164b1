#include "checkpoint/run_settings.h"

#include <cstdio>
#include <cstdlib>
#include <ostream>

#include "checkpoint/manifest.h"

namespace trident::checkpoint {

using json = nlohmann::ordered_json;

namespace {

// Floats (saved from float) with the fewest digits that still read back as the same float.
std::string shown(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_number_float()) return v.dump();
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v.get<double>());
    if (std::strtof(buf, nullptr) == (float)v.get<double>()) break;
  }
  return buf;
}

}  // namespace

json run_json(const std::vector<RunSetting>& settings) {
  json run = json::object();
  for (const RunSetting& s : settings) run[s.key] = s.value;
  return run;
}

std::vector<std::string> run_differences(const json& saved,
                                         const std::vector<RunSetting>& settings) {
  std::vector<std::string> out;
  for (const RunSetting& s : settings)
    if (saved.contains(s.key) && saved[s.key] != s.value)
      out.push_back(s.flag + ": checkpoint " + shown(saved[s.key]) + ", this run " +
                    shown(s.value));
  return out;
}

void check_run_settings(const json& manifest, const std::string& manifest_path,
                        const std::vector<RunSetting>& settings, LoadMode mode, std::ostream& log) {
  if (mode == LoadMode::kWeightsOnly) return;
  if (!manifest.contains("run")) {
    log << "note: " << manifest_path
        << " records no run settings (older trident, or written by convert): seed, batch, data "
           "and LR schedule not compared\n";
    return;
  }
  std::vector<std::string> differences = run_differences(manifest["run"], settings);
  if (mode == LoadMode::kResumeOverride) {
    for (const std::string& d : differences)
      log << "warning: --override-checkpoint-config: " << d << "\n";
    return;
  }
  if (differences.empty()) return;
  std::string message = manifest_path + ": this run differs from the checkpoint in " +
                        std::to_string(differences.size()) + " setting" +
                        (differences.size() > 1 ? "s" : "") +
                        " (--override-checkpoint-config resumes anyway, --finetune loads only "
                        "the weights):";
  for (const std::string& d : differences) message += "\n  " + d;
  throw CheckpointError(message);
}

}  // namespace trident::checkpoint
