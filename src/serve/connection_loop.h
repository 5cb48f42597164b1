#pragma once
// The connections of `trident serve`. One thread runs an epoll loop: it accepts clients,
// reads their requests as bytes arrive (RequestParser counts every limit as they come),
// enforces the deadlines and the connection caps, and hands each complete request to a
// worker thread, which runs the handler, writes the answer and gives the connection back
// for the next request. A slow client therefore costs a socket and a small buffer, never a
// thread: hundreds can drip headers while every other request is answered at once.
//
// Threads: run() on the loop's own thread; begin_shutdown() and stop() from any thread; the
// handler and the ErrorResponder on worker threads (the ErrorResponder on the loop's too).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "serve/http_message.h"
#include "serve/http_parser.h"

namespace trident::serve {

struct ConnectionOptions {
  int max_connections = 1024;                        // open at once, from all clients
  int max_connections_per_client = 128;              // from one address
  std::chrono::milliseconds idle_timeout{5000};      // for a request's first byte
  std::chrono::milliseconds request_timeout{30000};  // for its head and body, from then on
  std::chrono::milliseconds write_timeout{30000};    // for each write of an answer
  int workers = 64;
};

using Handler = std::function<void(const HttpRequest&, HttpResponse*)>;
// The answer to a request the loop refuses itself (400, 408, 413, 431, 503, ...).
using ErrorResponder = std::function<HttpResponse(int status, const std::string& message)>;

class ConnectionLoop {
 public:
  // Takes `listen_fd` (bound, listening) and closes it.
  ConnectionLoop(int listen_fd, const HttpLimits& limits, const ConnectionOptions& options,
                 Handler handler, ErrorResponder errors);
  ~ConnectionLoop();
  ConnectionLoop(const ConnectionLoop&) = delete;
  ConnectionLoop& operator=(const ConnectionLoop&) = delete;

  // Serves until stop() and every answer in progress is written.
  void run();
  // No new connections; those waiting for a request are closed; requests a worker holds are
  // answered, with "Connection: close".
  void begin_shutdown();
  // Ends run() once the workers' answers are written.
  void stop();

 private:
  struct Connection;
  void accept_all();
  void admit(int fd, const std::string& peer);
  bool make_room(const std::string& peer);
  bool shed_oldest(const std::string* peer);
  void on_readable(Connection& c);
  bool advance(Connection& c);
  void dispatch(Connection& c);
  void refuse(Connection& c, int status, const std::string& message);
  void close_connection(Connection& c);
  void take_returned();
  void expire();
  void shut_down_now();
  void work();
  void wake();

  const HttpLimits limits_;
  const ConnectionOptions options_;
  const Handler handler_;
  const ErrorResponder errors_;
  int listen_fd_, epoll_fd_, wake_fd_, spare_fd_;

  // The loop thread's own.
  std::unordered_map<int, std::unique_ptr<Connection>> connections_;
  std::unordered_map<std::string, int> per_client_;
  std::uint64_t accepted_ = 0;
  int with_workers_ = 0;
  bool listening_ = true;

  std::atomic<bool> shutting_down_{false}, stopping_{false};
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<Connection*> work_;       // guarded by mu_: complete requests for the workers
  std::vector<Connection*> returned_;  // guarded by mu_: answered, back to the loop
  bool workers_done_ = false;          // guarded by mu_
  std::vector<std::thread> workers_;
};

}  // namespace trident::serve
