#include "report/run_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/files.h"
#include "distributed/process_grid.h"
#include "pipeline_parallel/timeline.h"

namespace trident::report {

RunFiles find_run_files(const std::string& run, const std::string& metrics,
                        const std::string& timeline, bool live) {
  namespace fs = std::filesystem;
  RunFiles files{metrics, timeline};
  if (!run.empty()) {
    if (!live && !fs::is_directory(run))
      throw FormatError("RUN " + run +
                        " is not a directory (a run's directory, as train --report-dir writes "
                        "it; or give --metrics-file)");
    const fs::path dir(run);
    if (files.metrics.empty()) files.metrics = (dir / kMetricsName).string();
    if (files.timeline.empty() && (live || fs::exists(dir / kTimelineName)))
      files.timeline = (dir / kTimelineName).string();
  }
  if (files.metrics.empty()) throw FormatError("name a run directory or --metrics-file");
  if (!live && !fs::is_regular_file(files.metrics))
    throw FormatError("metrics file " + files.metrics + " does not exist");
  return files;
}

nlohmann::ordered_json read_metrics_rows(const std::string& path) {
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  if (!std::filesystem::exists(path)) return rows;
  std::ifstream in(path);
  if (!in) throw FormatError("cannot read the metrics file " + path);
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string text = whole.str();
  size_t begin = 0;
  for (long number = 1; begin < text.size(); ++number) {
    const size_t end = text.find('\n', begin);
    if (end == std::string::npos) break;  // still being written
    const std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    if (line.empty()) continue;
    nlohmann::ordered_json row = nlohmann::ordered_json::parse(line, nullptr, false);
    if (!row.is_object())
      throw FormatError("" + path + " line " + std::to_string(number) +
                        ": not a JSON object (the metrics file has one per line)");
    rows.push_back(std::move(row));
  }
  return rows;
}

namespace {

// The events of each rank's last step: from its last step marker on.
std::vector<pipeline_parallel::TraceEvent> last_step(
    const std::vector<pipeline_parallel::TraceEvent>& events) {
  std::map<int, double> last_start;
  for (const auto& e : events)
    if (e.category == "step") last_start[e.rank] = std::max(last_start[e.rank], e.start_us);
  std::vector<pipeline_parallel::TraceEvent> out;
  for (const auto& e : events)
    if (!last_start.count(e.rank) || e.start_us >= last_start[e.rank]) out.push_back(e);
  return out;
}

// An <svg> element for inside HTML, where the parser knows the namespace.
std::string inline_svg(std::string svg) {
  const std::string xmlns = " xmlns=\"http://www.w3.org/2000/svg\"";
  const size_t at = svg.find(xmlns);
  if (at != std::string::npos) svg.erase(at, xmlns.size());
  return svg;
}

// The ranks' labels (distributed::ProcessGrid::rank_label) from the last "run" row's layout
// (run_pictures.cpp write_run_description); none when there is no such row yet.
std::vector<std::string> rank_labels(const std::string& metrics) {
  const nlohmann::ordered_json rows = read_metrics_rows(metrics);
  for (auto row = rows.rbegin(); row != rows.rend(); ++row) {
    if (!row->contains("run")) continue;
    const auto& run = (*row)["run"];
    const int t = run.value("tensor", 1), c = run.value("context", 1), d = run.value("data", 1),
              p = run.value("pipeline", 1);
    if (t < 1 || c < 1 || d < 1 || p < 1) return {};
    return distributed::ProcessGrid(t * c * d * p, t, p, 1, 0, c).rank_labels();
  }
  return {};
}

}  // namespace

std::string timeline_figure(const RunFiles& files) {
  namespace pp = pipeline_parallel;
  if (files.timeline.empty() || !std::filesystem::exists(files.timeline)) return "";
  const std::vector<pp::TraceEvent> events = pp::read_chrome_trace(files.timeline);
  const std::vector<std::string> labels = rank_labels(files.metrics);
  return "<h3>The last iteration</h3><div id=\"timeline-last\">" +
         inline_svg(pp::render_timeline_svg(last_step(events), 1100, labels)) +
         "</div><h3>The whole run</h3><div id=\"timeline-run\">" +
         inline_svg(pp::render_timeline_svg(events, 4000, labels)) + "</div>";
}

}  // namespace trident::report
