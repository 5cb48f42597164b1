#pragma once
// The report page: one self-contained HTML file (inline SVG, inline script, no fonts or
// libraries from anywhere) drawing a run's metrics — loss and validation loss against
// iterations and tokens, learning rate, gradient norm, tokens/s, MFU, the memory plan, the
// collectives per iteration — and its measured pipeline timeline. The rows it draws are
// embedded as <script type="application/json" id="trident-metrics">; the charts are drawn
// from them by the page's script, which, when the page is served live, polls
// metrics.json and timeline (report/live_server.h) and redraws.
#include <nlohmann/json.hpp>
#include <string>

#include "report/run_files.h"

namespace trident::report {

// rows: the metrics file's rows; timeline: timeline_figure()'s markup ("" for none).
std::string report_page(const nlohmann::ordered_json& rows, const std::string& timeline,
                        const std::string& source, bool live);

// The page of the run's files as they are now (source: the metrics file's path).
std::string report_page(const RunFiles& files, bool live);

// The page's script and style (report/page_script.cpp).
const std::string& page_script();
const std::string& page_style();

}  // namespace trident::report
