#include "pipeline_parallel/timeline.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"

namespace trident::pipeline_parallel {

void write_chrome_trace(const std::string& path, const std::vector<TraceEvent>& events) {
  nlohmann::json trace = nlohmann::json::array();
  std::vector<int> ranks;
  for (const TraceEvent& e : events) {
    trace.push_back({{"name", e.name},
                     {"cat", e.category},
                     {"ph", "X"},
                     {"pid", 0},
                     {"tid", e.rank},
                     {"ts", e.start_us},
                     {"dur", e.duration_us}});
    if (std::find(ranks.begin(), ranks.end(), e.rank) == ranks.end()) ranks.push_back(e.rank);
  }
  for (int r : ranks)
    trace.push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", 0},
                     {"tid", r},
                     {"args", {{"name", "rank " + std::to_string(r)}}}});
  io::write_file_atomically(path, nlohmann::json({{"traceEvents", trace}}).dump() + "\n");
}

std::vector<double> measured_bubble(const std::vector<TraceEvent>& events, int ranks,
                                    const std::vector<std::string>& busy_categories) {
  double begin = 1e300, end = -1e300;
  std::vector<double> busy(ranks, 0.0);
  for (const TraceEvent& e : events) {
    if (std::find(busy_categories.begin(), busy_categories.end(), e.category) ==
        busy_categories.end())
      continue;
    begin = std::min(begin, e.start_us);
    end = std::max(end, e.start_us + e.duration_us);
    if (e.rank >= 0 && e.rank < ranks) busy[e.rank] += e.duration_us;
  }
  std::vector<double> bubble(ranks, 0.0);
  for (int r = 0; r < ranks; ++r) bubble[r] = busy[r] > 0 ? (end - begin - busy[r]) / busy[r] : 0;
  return bubble;
}

}  // namespace trident::pipeline_parallel
