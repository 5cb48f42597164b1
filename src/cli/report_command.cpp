#include "cli/report_command.h"

#include <filesystem>
#include <iostream>

#include "cli/parse_args.h"
#include "core/files.h"
#include "report/live_server.h"
#include "report/page.h"

namespace trident::cli {

namespace {

// RUN/report.html, or the metrics file's name with .html beside it.
std::string default_output(const std::string& run, const std::string& metrics) {
  if (!run.empty()) return (std::filesystem::path(run) / report::kPageName).string();
  return std::filesystem::path(metrics).replace_extension(".html").string();
}

}  // namespace

int report_main(const std::vector<std::string>& args) {
  CLI::App app(
      "trident report: one HTML page (no network needed) of a run's loss, validation loss, "
      "learning rate, grad norm, tokens/s, MFU, memory plan, collectives and measured "
      "pipeline timeline",
      "trident report");
  std::string run, metrics, timeline, output;
  int port = -1;
  app.add_option("RUN", run,
                 "the run's directory (train --report-dir): metrics.jsonl, timeline.json");
  app.add_option("--metrics-file", metrics, "the run's metrics (train --metrics-file)");
  app.add_option("--timeline", timeline, "the run's Chrome trace (train --timeline)");
  app.add_option("--output", output, "the page (default: RUN/report.html, or METRICS.html)");
  app.add_option("--serve", port,
                 "serve the page on 127.0.0.1:PORT instead, redrawn live as the run writes "
                 "(0: any free port)");
  int code = 0;
  if (!parse_args(app, args, &code)) return code;
  try {
    const report::RunFiles files = report::find_run_files(run, metrics, timeline, port >= 0);
    if (port >= 0) return report::serve_report(files, port, std::cout);
    if (output.empty()) output = default_output(run, files.metrics);
    write_file_atomically(output, report::report_page(files, false));
    std::cout << "report: " << output << " (open it in a browser; it needs no network)\n";
    return 0;
  } catch (const FormatError& e) {
    std::cerr << "trident report: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "trident report: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace trident::cli
