#include "report/page.h"

#include "pipeline_parallel/simulator.h"

namespace trident::report {

namespace {

// JSON inside <script>: a "</" in a string would end the element early; "<\/" is the same
// JSON string.
std::string script_safe_json(const nlohmann::ordered_json& rows) {
  std::string text = rows.dump();
  for (size_t at = text.find("</"); at != std::string::npos; at = text.find("</", at + 3))
    text.replace(at, 2, "<\\/");
  return text;
}

const char* kSections = R"HTML(<p id="summary"></p>
<div class="grid">
<section><h2>Loss against iterations</h2><div class="chart" id="chart-loss-iterations"></div></section>
<section><h2>Loss against tokens</h2><div class="chart" id="chart-loss-tokens"></div></section>
<section><h2>Learning rate</h2><div class="chart" id="chart-lr"></div></section>
<section><h2>Gradient norm</h2><div class="chart" id="chart-grad-norm"></div></section>
<section><h2>Throughput (tokens/s)</h2><div class="chart" id="chart-tokens-per-s"></div></section>
<section><h2>MFU</h2><div class="chart" id="chart-mfu"></div></section>
</div>
<section><h2>Memory plan (rank 0)</h2><div id="memory-plan"></div></section>
<section><h2>Collectives per training iteration (rank 0)</h2><div id="collectives"></div></section>
<section><h2>Measured pipeline timeline</h2><div id="timeline">)HTML";

}  // namespace

std::string report_page(const nlohmann::ordered_json& rows, const std::string& timeline,
                        const std::string& source, bool live) {
  std::string page =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<title>trident report</title>\n<link rel=\"icon\" href=\"data:,\">\n<style>" +
      page_style() + "</style></head>\n<body data-live=\"" + (live ? "1" : "0") +
      "\">\n<h1>trident report</h1>\n<p class=\"source\">" + pipeline_parallel::escape_xml(source) +
      "</p>\n" + kSections;
  page += timeline.empty() ? "<p class=\"none\">no timeline: train with --timeline FILE or "
                             "--report-dir DIR to record one</p>"
                           : timeline;
  page += "</div></section>\n<script type=\"application/json\" id=\"trident-metrics\">" +
          script_safe_json(rows) + "</script>\n<script>" + page_script() +
          "</script>\n</body></html>\n";
  return page;
}

std::string report_page(const RunFiles& files, bool live) {
  return report_page(read_metrics_rows(files.metrics), timeline_figure(files), files.metrics, live);
}

}  // namespace trident::report
