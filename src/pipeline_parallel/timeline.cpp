#include "pipeline_parallel/timeline.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "pipeline_parallel/simulator.h"

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
  write_file_atomically(path, nlohmann::json({{"traceEvents", trace}}).dump() + "\n");
}

namespace {

bool is_compute(const TraceEvent& e) {
  return e.category == "forward" || e.category == "backward" || e.category == "weight";
}

StageBubbles with_busiest(std::vector<double> bubble, const std::vector<double>& busy) {
  StageBubbles out{std::move(bubble), 0};
  out.busiest = (int)(std::max_element(busy.begin(), busy.end()) - busy.begin());
  return out;
}

}  // namespace

StageBubbles pipeline_bubble(const std::vector<TraceEvent>& step_events,
                             comm::Communicator& pipeline) {
  const int p = pipeline.size(), me = pipeline.rank();
  // Ranks' clocks share no origin, so each rank measures its own step — from the step's
  // start to its last compute — and the step length is the longest of them. Slot r of each
  // array is stage r's: summing over the group fills every slot exactly.
  std::vector<double> busy(p, 0.0), span(p, 0.0);
  double start = 1e300, last = -1e300;
  for (const TraceEvent& e : step_events) {
    if (e.category == "step") start = std::min(start, e.start_us);
    if (!is_compute(e)) continue;
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
  return with_busiest(std::move(bubble), busy);
}

StageBubbles replayed_bubble(const std::vector<TraceEvent>& step_events,
                             const ScheduleConfig& schedule, comm::Communicator& pipeline) {
  const int p = pipeline.size(), me = pipeline.rank(), v = schedule.chunks;
  // [kind][rank * v + chunk]: summed CPU time and count of this rank's ops, then gathered.
  const char* kinds[] = {"forward", "backward", "weight"};
  std::vector<double> sum(3 * p * v, 0.0), count(3 * p * v, 0.0);
  for (const TraceEvent& e : step_events)
    for (int k = 0; k < 3; ++k)
      if (e.category == kinds[k] && e.chunk < v) {
        sum[(k * p + me) * v + e.chunk] += e.cpu_us;
        count[(k * p + me) * v + e.chunk] += 1;
      }
  pipeline.all_reduce(sum.data(), (long)sum.size(), comm::ReduceOp::kSum);
  pipeline.all_reduce(count.data(), (long)count.size(), comm::ReduceOp::kSum);
  OpTimes times;
  std::vector<std::vector<double>>* tables[] = {&times.forward, &times.backward, &times.weight};
  for (int k = 0; k < 3; ++k) {
    tables[k]->assign(p, std::vector<double>(v, 0.0));
    for (int r = 0; r < p; ++r)
      for (int j = 0; j < v; ++j) {
        const int i = (k * p + r) * v + j;
        (*tables[k])[r][j] = count[i] > 0 ? sum[i] / count[i] : 0.0;
      }
  }
  const Simulation sim = simulate(schedule, times);
  std::vector<double> bubble(p);
  for (int r = 0; r < p; ++r) bubble[r] = sim.bubble_fraction(r);
  return with_busiest(std::move(bubble), sim.busy);
}

}  // namespace trident::pipeline_parallel
