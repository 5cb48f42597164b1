#pragma once
// `trident report RUN --serve PORT`: the report page on 127.0.0.1, live while the run
// writes. GET / is the page of the files as they are now, GET /metrics.json their rows (the
// array the page embeds) and GET /timeline the timeline's drawing as the page inlines it
// (204 until the run has written one); the page polls the last two every 2 s and redraws.
#include <ostream>

#include "report/run_files.h"

namespace trident::report {

// Binds 127.0.0.1:port (0: any free port), prints the address on `log`, and serves until the
// process ends. Returns 2 (naming the port) when the port cannot be bound.
int serve_report(const RunFiles& files, int port, std::ostream& log);

}  // namespace trident::report
