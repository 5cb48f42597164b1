#include "serve/http_server.h"

#include <sys/socket.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve/responses.h"

namespace trident::serve {

// httplib's listen backlog is compiled into Debian's library as 5; a burst of clients
// connecting at once would see SYNs dropped and 1 s retransmits. listen() on a listening
// socket only changes its backlog, so it is raised after the bind.
class HttpServer::Server : public httplib::Server {
 public:
  void deepen_backlog() { ::listen(svr_sock_, 1024); }
};

namespace {

ApiError route_not_found(const httplib::Request& req) {
  ApiError e;
  e.status = 404;
  e.code = "not_found";
  e.message = "no route " + req.method + " " + req.path +
              " (routes: PUT /api, POST /v1/completions, GET /v1/models, GET /health, GET /)";
  return e;
}

ApiError http_error(int status) {
  ApiError e;
  e.status = status;
  e.message = "HTTP " + std::to_string(status);
  if (status == 413) e.message = "request body is larger than --max-body-bytes";
  if (status == 400) e.message = "malformed HTTP request";
  if (status >= 500) e.type = "server_error";
  return e;
}

std::string health(const Service& s) {
  EngineStats st = s.engine.stats();
  return nlohmann::json{{"status", "ok"},
                        {"model", s.model_name},
                        {"queued", st.queued},
                        {"running", st.running},
                        {"completed", st.completed},
                        {"cancelled", st.cancelled},
                        {"generated_tokens", st.generated_tokens}}
      .dump();
}

}  // namespace

HttpServer::HttpServer(Service& service, const HttpOptions& options)
    : service_(service), options_(options), server_(std::make_unique<Server>()) {
  const int threads = options.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(options.max_body_bytes);
  server_->set_keep_alive_max_count(1000);
  add_routes();
}

HttpServer::~HttpServer() = default;

void HttpServer::add_routes() {
  Service& s = service_;
  server_->Put("/api", [&s](const auto& req, auto& res) { handle_megatron(s, req, res); });
  server_->Post("/v1/completions",
                [&s](const auto& req, auto& res) { handle_completion(s, req, res); });
  server_->Get("/v1/models", [&s](const auto&, auto& res) {
    send_json(res, models_response(s.model_name, s.started));
  });
  server_->Get("/health", [&s](const auto&, auto& res) { send_json(res, health(s)); });
  server_->Get("/", [](const auto&, auto& res) {
    res.set_content(index_page(), "text/html; charset=utf-8");
  });
  // Whatever httplib answers by itself (unknown route, body too large, bad HTTP) gets the
  // same JSON error shape as the handlers' errors.
  server_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.get_header_value("Content-Type") == "application/json") return;
    send_error(res, res.status == 404 ? route_not_found(req) : http_error(res.status));
  });
  server_->set_exception_handler([](const auto&, auto& res, std::exception_ptr ep) {
    ApiError e = http_error(500);
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      e.message = std::string("internal error: ") + ex.what();
    } catch (...) {
      e.message = "internal error";
    }
    send_error(res, e);
  });
}

std::string HttpServer::bind() {
  if (options_.port == 0) {
    port_ = server_->bind_to_any_port(options_.host);
    if (port_ <= 0) return "cannot bind " + options_.host + " to any port";
  } else {
    if (!server_->bind_to_port(options_.host, options_.port))
      return "cannot bind " + options_.host + ":" + std::to_string(options_.port) +
             " (in use, or not an address of this machine)";
    port_ = options_.port;
  }
  server_->deepen_backlog();
  return "";
}

void HttpServer::serve() {
  server_->listen_after_bind();
}

bool HttpServer::wait_until_running() {
  for (int i = 0; i < 10000 && !server_->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return server_->is_running();
}

void HttpServer::stop() {
  server_->stop();
}

}  // namespace trident::serve
