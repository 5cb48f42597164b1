#pragma once
// The HTTP front end of `trident serve`: the routes of both APIs, API-key authentication,
// and JSON errors for everything, over ConnectionLoop (which owns sockets and threads).
#include <memory>
#include <string>

#include "serve/connection_loop.h"
#include "serve/service.h"

namespace trident::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 5000;  // 0: any free port
  HttpLimits limits;
  ConnectionOptions connections;
  // Non-empty: the API routes (/api, /v1/...) want "Authorization: Bearer <api_key>"; the
  // page and /health stay open.
  std::string api_key;
};

class HttpServer {
 public:
  HttpServer(Service& service, const HttpOptions& options);
  ~HttpServer();
  // Binds and listens (before the model loads, so a busy port fails fast); raises the open
  // file limit to what connections need. Empty, or why not.
  std::string bind();
  int port() const { return port_; }
  // The connections that may be open at once (--max-connections, within the file limit).
  int max_connections() const { return options_.connections.max_connections; }
  // Serves until stop(); run it on its own thread, after bind().
  void serve();
  // Any thread: no new connections; requests already read are answered.
  void begin_shutdown();
  // Any thread: ends serve() once the answers in progress are written.
  void stop();

 private:
  void handle(const HttpRequest& req, HttpResponse* res) const;
  bool authorized(const HttpRequest& req) const;
  Service& service_;
  HttpOptions options_;
  std::unique_ptr<ConnectionLoop> loop_;
  int port_ = 0;
};

// The answer for an error the front end finds itself (status and message).
HttpResponse front_end_error(int status, const std::string& message);

// The page at GET /: a prompt box whose completion streams in, and a chat whose replies
// stream into its last bubble (no external assets).
const std::string& index_page();

}  // namespace trident::serve
