#include "serve/http_server.h"

#include <netdb.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "serve/responses.h"

namespace trident::serve {

namespace {

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

ApiError route_not_found(const HttpRequest& req) {
  ApiError e;
  e.status = 404;
  e.code = "not_found";
  e.message =
      "no route " + req.method + " " + req.path +
      " (routes: PUT /api, POST /v1/completions, POST /v1/chat/completions, GET /v1/models, "
      "GET /health, GET /)";
  return e;
}

// Compares every byte of the key whatever matches, so the time taken says nothing of how
// much of a guess was right.
bool same_secret(std::string_view given, std::string_view key) {
  unsigned diff = given.size() != key.size();
  for (size_t i = 0; i < key.size(); ++i)
    diff |= (unsigned char)key[i] ^ (unsigned char)(i < given.size() ? given[i] : 0);
  return diff == 0;
}

// The open-file limit raised to its hard limit; the connections that fit under it, leaving
// room for the model's files, MPI and the workers.
int connections_within_file_limit(int wanted) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) return wanted;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &r);
    ::getrlimit(RLIMIT_NOFILE, &r);
  }
  const long room = (long)std::min<rlim_t>(r.rlim_cur, 1 << 20) - 128;
  return (int)std::max(1L, std::min((long)wanted, room));
}

// A listening socket on host:port (the first address of the host that binds), or -1.
int listen_on(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    const int one = 1;
    if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // A deep backlog: a burst of clients connecting at once is not answered with dropped
    // SYNs and 1 s retransmits.
    if (fd >= 0 && (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0)) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, (sockaddr*)&a, &len) != 0) return -1;
  if (a.ss_family == AF_INET6) return ntohs(((sockaddr_in6&)a).sin6_port);
  return ntohs(((sockaddr_in&)a).sin_port);
}

}  // namespace

HttpResponse front_end_error(int status, const std::string& message) {
  ApiError e;
  e.status = status;
  e.message = message;
  if (status >= 500) e.type = "server_error";
  HttpResponse res;
  send_error(res, e);
  return res;
}

HttpServer::HttpServer(Service& service, const HttpOptions& options)
    : service_(service), options_(options) {}

HttpServer::~HttpServer() = default;

std::string HttpServer::bind() {
  options_.connections.max_connections =
      connections_within_file_limit(options_.connections.max_connections);
  options_.connections.max_connections_per_client = std::min(
      options_.connections.max_connections_per_client, options_.connections.max_connections);
  const int fd = listen_on(options_.host, options_.port);
  if (fd < 0)
    return "cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
           " (in use, or not an address of this machine)";
  port_ = bound_port(fd);
  loop_ = std::make_unique<ConnectionLoop>(
      fd, options_.limits, options_.connections,
      [this](const HttpRequest& req, HttpResponse* res) { handle(req, res); }, front_end_error);
  return "";
}

void HttpServer::serve() {
  loop_->run();
}
void HttpServer::begin_shutdown() {
  loop_->begin_shutdown();
}
void HttpServer::stop() {
  loop_->stop();
}

bool HttpServer::authorized(const HttpRequest& req) const {
  if (options_.api_key.empty()) return true;
  const std::string* auth = req.header("authorization");
  if (!auth || auth->size() < 7) return false;
  std::string scheme = auth->substr(0, 7);
  std::transform(scheme.begin(), scheme.end(), scheme.begin(), ::tolower);
  return scheme == "bearer " && same_secret(std::string_view(*auth).substr(7), options_.api_key);
}

void HttpServer::handle(const HttpRequest& req, HttpResponse* res) const {
  Service& s = service_;
  const bool api = req.path == "/api" || req.path.rfind("/v1/", 0) == 0;
  if (api && !authorized(req)) {
    ApiError e;
    e.status = 401;
    e.code = "invalid_api_key";
    e.message =
        "missing or wrong API key: send the header 'Authorization: Bearer <key>' "
        "with the key the server was started with (--api-key / --api-key-file)";
    send_error(*res, e);
    res->headers.emplace_back("WWW-Authenticate", "Bearer");
  } else if (req.method == "PUT" && req.path == "/api") {
    handle_megatron(s, req, *res);
  } else if (req.method == "POST" && req.path == "/v1/completions") {
    handle_completion(s, req, *res);
  } else if (req.method == "POST" && req.path == "/v1/chat/completions") {
    handle_chat_completion(s, req, *res);
  } else if (req.method == "GET" && req.path == "/v1/models") {
    send_json(*res, models_response(s.model_name, s.started));
  } else if (req.method == "GET" && req.path == "/health") {
    send_json(*res, health(s));
  } else if (req.method == "GET" && req.path == "/") {
    res->body = index_page();
    res->content_type = "text/html; charset=utf-8";
  } else {
    send_error(*res, route_not_found(req));
  }
}

}  // namespace trident::serve
