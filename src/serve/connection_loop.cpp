#include "serve/connection_loop.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include "serve/connection.h"
#include "serve/http_writer.h"

namespace trident::serve {

void watch(int epoll_fd, int fd) {
  epoll_event e{};
  e.events = EPOLLIN;
  e.data.fd = fd;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &e) != 0)
    throw std::runtime_error("epoll_ctl failed");
}

ConnectionLoop::ConnectionLoop(int listen_fd, const HttpLimits& limits,
                               const ConnectionOptions& options, Handler handler,
                               ErrorResponder errors)
    : limits_(limits),
      options_(options),
      handler_(std::move(handler)),
      errors_(std::move(errors)),
      listen_fd_(listen_fd),
      epoll_fd_(::epoll_create1(EPOLL_CLOEXEC)),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      spare_fd_(::open("/dev/null", O_RDONLY | O_CLOEXEC)) {
  if (epoll_fd_ < 0 || wake_fd_ < 0) throw std::runtime_error("epoll or eventfd failed");
  ::fcntl(listen_fd_, F_SETFL, ::fcntl(listen_fd_, F_GETFL) | O_NONBLOCK);
  watch(epoll_fd_, listen_fd_);
  watch(epoll_fd_, wake_fd_);
  for (int i = 0; i < options_.workers; ++i) workers_.emplace_back([this] { work(); });
}

ConnectionLoop::~ConnectionLoop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers_done_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  for (auto& [fd, c] : connections_) ::close(fd);
  for (int fd : {listening_ ? listen_fd_ : -1, epoll_fd_, wake_fd_, spare_fd_})
    if (fd >= 0) ::close(fd);
}

void ConnectionLoop::wake() {
  const std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void ConnectionLoop::begin_shutdown() {
  shutting_down_ = true;
  wake();
}

void ConnectionLoop::stop() {
  shutting_down_ = true;
  stopping_ = true;
  wake();
}

void ConnectionLoop::run() {
  epoll_event events[64];
  Clock::time_point next_expiry = Clock::now();
  while (!(stopping_ && with_workers_ == 0)) {
    const int n = ::epoll_wait(epoll_fd_, events, 64, 100);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_ && listening_) {
        accept_all();
      } else if (fd == wake_fd_) {
        std::uint64_t count;
        [[maybe_unused]] ssize_t r = ::read(wake_fd_, &count, sizeof count);
      } else if (auto it = connections_.find(fd); it != connections_.end()) {
        on_readable(*it->second);
      }
    }
    take_returned();
    if (shutting_down_ && listening_) shut_down_now();
    if (Clock::now() >= next_expiry) {
      expire();
      next_expiry = Clock::now() + std::chrono::milliseconds(100);
    }
  }
}

}  // namespace trident::serve

namespace trident::serve {

void ConnectionLoop::work() {
  while (true) {
    Connection* c = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [this] { return workers_done_ || !work_.empty(); });
      if (work_.empty()) return;
      c = work_.front();
      work_.pop_front();
    }
    HttpResponse res;
    try {
      handler_(c->request, &res);
    } catch (const std::exception& e) {
      res = errors_(500, std::string("internal error: ") + e.what());
    }
    const bool keep_alive = c->request.keep_alive && !shutting_down_;
    c->reusable = write_response(c->fd, res, keep_alive, options_.write_timeout) && keep_alive;
    {
      std::lock_guard<std::mutex> lock(mu_);
      returned_.push_back(c);
    }
    wake();
  }
}

void ConnectionLoop::dispatch(Connection& c) {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  c.with_worker = true;
  ++with_workers_;
  c.request = c.parser.take();
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_.push_back(&c);
  }
  work_cv_.notify_one();
}

// Answered connections come back: kept for the next request (whose first bytes may already
// be here), or closed.
void ConnectionLoop::take_returned() {
  std::vector<Connection*> back;
  {
    std::lock_guard<std::mutex> lock(mu_);
    back.swap(returned_);
  }
  for (Connection* c : back) {
    c->with_worker = false;
    --with_workers_;
    if (!c->reusable || shutting_down_) {
      close_connection(*c);
      continue;
    }
    c->reading_request = false;
    c->deadline = Clock::now() + options_.idle_timeout;
    watch(epoll_fd_, c->fd);
    if (!c->pending.empty()) advance(*c);
  }
}

// Stops accepting and closes every connection that has no worker: nothing it sent is a
// request yet (or its answer is written), so nothing is lost.
void ConnectionLoop::shut_down_now() {
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
  ::close(listen_fd_);
  listening_ = false;
  std::vector<Connection*> idle;
  for (auto& [fd, c] : connections_)
    if (!c->with_worker) idle.push_back(c.get());
  for (Connection* c : idle) {
    if (c->reading_request && !c->draining)
      write_now(c->fd, whole_response(errors_(503, "the server is shutting down"), false));
    close_connection(*c);
  }
}

void ConnectionLoop::close_connection(Connection& c) {
  const int fd = c.fd;
  if (!c.with_worker) ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  if (--per_client_[c.peer] == 0) per_client_.erase(c.peer);
  connections_.erase(fd);  // destroys c
  ::close(fd);
}

}  // namespace trident::serve
