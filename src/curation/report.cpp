#include "curation/report.h"

namespace trident::curation {

void StageReport::merge(const StageReport& o) {
  documents_in += o.documents_in;
  bytes_in += o.bytes_in;
  kept += o.kept;
  removed += o.removed;
  for (const auto& [k, v] : o.reasons) reasons[k] += v;
  for (const auto& [k, v] : o.languages) languages[k] += v;
  cpu_seconds += o.cpu_seconds;
  global_seconds = std::max(global_seconds, o.global_seconds);
  if (extra.empty()) extra = o.extra;
}

nlohmann::json StageReport::to_json() const {
  nlohmann::json j = {{"stage", name},
                      {"documents_in", documents_in},
                      {"bytes_in", bytes_in},
                      {"kept", kept},
                      {"removed", removed},
                      {"reasons", reasons},
                      {"cpu_seconds", cpu_seconds},
                      {"global_seconds", global_seconds}};
  const double s = cpu_seconds + global_seconds;
  j["mb_per_s_per_worker"] = s > 0 ? bytes_in / s / 1e6 : 0.0;
  if (!languages.empty()) j["languages"] = languages;
  for (const auto& [k, v] : extra.items()) j[k] = v;
  return j;
}

StageReport StageReport::from_json(const nlohmann::json& j) {
  StageReport r;
  r.name = j.at("stage");
  r.documents_in = j.at("documents_in");
  r.bytes_in = j.at("bytes_in");
  r.kept = j.at("kept");
  r.removed = j.at("removed");
  r.reasons = j.at("reasons").get<std::map<std::string, long>>();
  if (j.contains("languages")) r.languages = j["languages"].get<std::map<std::string, long>>();
  r.cpu_seconds = j.at("cpu_seconds");
  r.global_seconds = j.at("global_seconds");
  for (const auto& [k, v] : j.items())
    if (!r.to_json().contains(k) && k != "mb_per_s_per_worker") r.extra[k] = v;
  return r;
}

}  // namespace trident::curation
