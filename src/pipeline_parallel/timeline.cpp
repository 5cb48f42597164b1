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

std::vector<double> pipeline_bubble(const std::vector<TraceEvent>& step_events,
                                    comm::Communicator& pipeline) {
  const int p = pipeline.size(), me = pipeline.rank();
  // Ranks' clocks share no origin, so each rank measures its own step — from the step's
  // start to its last compute — and the step length is the longest of them. Slot r of each
  // array is stage r's: summing over the group fills every slot exactly.
  std::vector<double> busy(p, 0.0), span(p, 0.0);
  double start = 1e300, last = -1e300;
  for (const TraceEvent& e : step_events) {
    if (e.category == "step") start = std::min(start, e.start_us);
    if (e.category != "forward" && e.category != "backward" && e.category != "weight") continue;
    busy[me] += e.duration_us;
    start = std::min(start, e.start_us);
    last = std::max(last, e.start_us + e.duration_us);
  }
  span[me] = busy[me] > 0 ? last - start : 0.0;
  pipeline.all_reduce(busy.data(), p, comm::ReduceOp::kSum);
  pipeline.all_reduce(span.data(), p, comm::ReduceOp::kSum);
  const double step = *std::max_element(span.begin(), span.end());
  std::vector<double> bubble(p, 0.0);
  for (int r = 0; r < p; ++r) bubble[r] = busy[r] > 0 ? (step - busy[r]) / busy[r] : 0.0;
  return bubble;
}

}  // namespace trident::pipeline_parallel
