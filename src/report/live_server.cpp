#include "report/live_server.h"

#include <httplib.h>

#include <exception>
#include <functional>

#include "report/page.h"

namespace trident::report {

namespace {

// Each request reads the files afresh: the run appends to them while the page is open. A
// file the reader cannot parse answers 500 with the reason, and the page keeps its drawing.
void answer(httplib::Response& res, const std::function<std::string()>& body,
            const char* content_type) {
  try {
    const std::string text = body();
    if (text.empty()) {
      res.status = 204;
      return;
    }
    res.set_content(text, content_type);
    res.set_header("Cache-Control", "no-store");
  } catch (const std::exception& e) {
    res.status = 500;
    res.set_content(std::string(e.what()) + "\n", "text/plain; charset=utf-8");
  }
}

}  // namespace

int serve_report(const RunFiles& files, int port, std::ostream& log) {
  httplib::Server server;
  server.Get("/", [&](const httplib::Request&, httplib::Response& res) {
    answer(
        res, [&] { return report_page(files, true); }, "text/html; charset=utf-8");
  });
  server.Get("/metrics.json", [&](const httplib::Request&, httplib::Response& res) {
    answer(
        res, [&] { return read_metrics_rows(files.metrics).dump(); }, "application/json");
  });
  server.Get("/timeline", [&](const httplib::Request&, httplib::Response& res) {
    answer(
        res, [&] { return timeline_figure(files); }, "image/svg+xml");
  });
  const int bound = port == 0 ? server.bind_to_any_port("127.0.0.1") : port;
  if (bound < 0 || (port != 0 && !server.bind_to_port("127.0.0.1", port))) {
    log << "trident report: cannot listen on 127.0.0.1:" << port
        << " (--serve: a free port, or 0 for any)\n";
    return 2;
  }
  log << "report: http://127.0.0.1:" << bound << "/ (live from " << files.metrics
      << "; Ctrl-C ends it)\n"
      << std::flush;
  server.listen_after_bind();
  return 0;
}

}  // namespace trident::report
