#pragma once
// The files a training run leaves for its report: the metrics (JSON lines) and, when the run
// recorded one, the timeline (Chrome trace). `train --report-dir DIR` writes them under the
// names below, and `trident report DIR` finds them there.
#include <nlohmann/json.hpp>
#include <string>

namespace trident::report {

inline constexpr const char* kMetricsName = "metrics.jsonl";
inline constexpr const char* kTimelineName = "timeline.json";
inline constexpr const char* kTimelineSvgName = "timeline.svg";
inline constexpr const char* kPageName = "report.html";

struct RunFiles {
  std::string metrics;
  std::string timeline;  // "": none
};

// RUN is a directory holding metrics.jsonl (and timeline.json when written), or "" with the
// files given one by one; an explicit file overrides the directory's. FormatError naming the
// path when there is no metrics file or RUN is not a directory. live: a run that is starting
// may not have written them yet (the page waits for them).
RunFiles find_run_files(const std::string& run, const std::string& metrics,
                        const std::string& timeline, bool live = false);

// Every row of the metrics file, in order, as one JSON array ([] when the file does not exist
// yet). A last line without its newline is a row still being written (a live run) and is left
// out; any other line that is not a JSON object is a FormatError naming the file and line.
nlohmann::ordered_json read_metrics_rows(const std::string& path);

// The timeline drawn (pipeline_parallel::render_timeline_svg) as markup to put inside an HTML
// page: the last iteration (div#timeline-last: the run's schedule, at a readable scale) and
// the whole run (div#timeline-run: every event of the trace); "" when the run has no
// timeline file, or not yet. Each rank's row is named by its grid coordinates (t, c, d, p)
// when the metrics file's "run" row gives the layout (train writes it at start-up), and
// "rank R" before it has.
std::string timeline_figure(const RunFiles& files);

}  // namespace trident::report
