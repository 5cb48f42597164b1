#pragma once
// The JSON report of a curation run: per stage, documents and bytes in, kept, removed by
// reason, and time; merged over ranks.
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace trident::curation {

struct StageReport {
  std::string name;
  long documents_in = 0;
  double bytes_in = 0;
  long kept = 0;
  long removed = 0;
  std::map<std::string, long> reasons;
  std::map<std::string, long> languages;  // langid only
  double cpu_seconds = 0;                 // per-document work summed over workers and ranks
  double global_seconds = 0;              // the exchange and decisions across ranks (slowest rank)
  nlohmann::json extra = nlohmann::json::object();  // stage facts (LSH parameters, ...)

  void remove(const std::string& reason) { ++removed, ++reasons[reason]; }
  void merge(const StageReport& other);  // counts and times added, extra kept when set
  nlohmann::json to_json() const;
  static StageReport from_json(const nlohmann::json& j);
};

}  // namespace trident::curation
