#pragma once
// The HTTP front end (cpp-httplib): routes, JSON errors for everything httplib answers itself
// (404, 413, exceptions), a handler thread per waiting client, and a deeper listen backlog.
#include <httplib.h>

#include <memory>
#include <string>

#include "serve/service.h"

namespace trident::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 5000;  // 0: any free port
  size_t max_body_bytes = 1 << 20;
  // Handler threads: every client waiting on a generation holds one (running + queued +
  // some for cheap requests); further connections wait for a thread.
  int threads = 64;
};

class HttpServer {
 public:
  HttpServer(Service& service, const HttpOptions& options);
  ~HttpServer();
  // Binds the socket (before the model loads, so a busy port fails fast). Empty, or why not.
  std::string bind();
  int port() const { return port_; }
  // Accepts and serves connections until stop(); run it on its own thread.
  void serve();
  // Blocks until serve() accepts (a stop() before that would be lost); false after 10 s.
  bool wait_until_running();
  // Ends serve(): no new connections; returns once the handlers in flight have answered.
  void stop();

 private:
  class Server;
  void add_routes();
  Service& service_;
  HttpOptions options_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

// The page at GET /: a prompt box whose completion streams in (no external assets).
const std::string& index_page();

}  // namespace trident::serve
