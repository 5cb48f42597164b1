#include "pipeline_parallel/timeline.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

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
                     {"dur", e.duration_us},
                     {"args", {{"cpu_us", e.cpu_us}}}});
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

// "F 3.1", "B 0.0 <- 1": the micro-batch and chunk of an op named by to_string(PipelineOp).
void microbatch_and_chunk(const std::string& name, int* microbatch, int* chunk) {
  if (std::sscanf(name.c_str(), "%*s %d.%d", microbatch, chunk) != 2) *microbatch = -1, *chunk = 0;
}

TraceEvent event_of(const nlohmann::json& e) {
  TraceEvent out;
  out.name = e.value("name", "");
  out.category = e.value("cat", "");
  out.rank = e.at("tid").get<int>();
  out.start_us = e.at("ts").get<double>();
  out.duration_us = e.value("dur", 0.0);
  if (e.contains("args") && e["args"].is_object()) out.cpu_us = e["args"].value("cpu_us", 0.0);
  int microbatch = -1;
  microbatch_and_chunk(out.name, &microbatch, &out.chunk);
  return out;
}

}  // namespace

std::vector<TraceEvent> read_chrome_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw FormatError("timeline " + path + ": cannot read it");
  std::stringstream text;
  text << in.rdbuf();
  std::vector<TraceEvent> events;
  try {
    const nlohmann::json trace = nlohmann::json::parse(text.str());
    for (const nlohmann::json& e : trace.at("traceEvents"))
      if (e.value("ph", "") == "X") events.push_back(event_of(e));
  } catch (const nlohmann::json::exception& e) {
    throw FormatError("timeline " + path +
                      ": not a Chrome trace of complete events ({\"traceEvents\": [{\"ph\": "
                      "\"X\", \"tid\", \"ts\", ...}]}): " +
                      e.what());
  }
  return events;
}

namespace {

// Ranks' clocks share no origin (each starts with its executor), but a step's optimizer op
// begins as the step's closing all-reduce of the loss over the pipeline returns, on all
// ranks at once: each rank's events are shifted to put its first optimizer op at the
// earliest one's.
std::vector<TraceEvent> aligned_at_first_optimizer_op(std::vector<TraceEvent> events) {
  std::map<int, double> first_optimizer;
  for (const TraceEvent& e : events)
    if (e.category == "optimizer" && !first_optimizer.count(e.rank))
      first_optimizer[e.rank] = e.start_us;
  if (first_optimizer.empty()) return events;
  double earliest = 1e300;
  for (const auto& [rank, start] : first_optimizer) earliest = std::min(earliest, start);
  for (TraceEvent& e : events)
    if (first_optimizer.count(e.rank)) e.start_us -= first_optimizer[e.rank] - earliest;
  return events;
}

}  // namespace

std::string render_timeline_svg(const std::vector<TraceEvent>& measured, double width_px,
                                const std::vector<std::string>& rank_names) {
  const std::vector<TraceEvent> events = aligned_at_first_optimizer_op(measured);
  BoxDrawing d;
  std::vector<int> ranks;
  double first = 1e300, last = -1e300;
  for (const TraceEvent& e : events) {
    if (std::find(ranks.begin(), ranks.end(), e.rank) == ranks.end()) ranks.push_back(e.rank);
    first = std::min(first, e.start_us), last = std::max(last, e.start_us + e.duration_us);
  }
  std::sort(ranks.begin(), ranks.end());
  for (int r : ranks)
    d.row_names.push_back(r >= 0 && r < (int)rank_names.size() ? rank_names[r]
                                                               : "rank " + std::to_string(r));
  d.span = events.empty() ? 0.0 : (last - first) / 1e3;
  // Thin boxes stay, each still one <rect> (draw_boxes_svg gives them half a pixel).
  d.unit = d.span > 0 ? width_px / d.span : 1.0;
  for (const TraceEvent& e : events) {
    const int row = (int)(std::find(ranks.begin(), ranks.end(), e.rank) - ranks.begin());
    int microbatch = -1, chunk = 0;
    microbatch_and_chunk(e.name, &microbatch, &chunk);
    const bool compute = is_compute(e);
    char tooltip[256];
    std::snprintf(tooltip, sizeof tooltip, "rank %d: %s (%s) %.3f ms at %.3f ms", e.rank,
                  e.name.c_str(), e.category.c_str(), e.duration_us / 1e3,
                  (e.start_us - first) / 1e3);
    d.boxes.push_back({row, (e.start_us - first) / 1e3, (e.start_us + e.duration_us - first) / 1e3,
                       e.category, compute ? chunk : 0,
                       compute && microbatch >= 0 ? std::to_string(microbatch + 1) : "", tooltip});
  }
  char title[160];
  std::snprintf(title, sizeof title, "measured timeline: %zu events on %zu ranks over %.1f ms",
                events.size(), ranks.size(), d.span);
  d.title = title;
  d.legend =
      "blue: forward, orange: backward, green: weight gradient (shade = model chunk; numbers "
      "are micro-batches); grey: send, receive, wait; purple: optimizer; yellow: data-parallel";
  return draw_boxes_svg(d);
}

namespace {

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
