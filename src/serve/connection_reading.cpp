// The loop's side of ConnectionLoop: accepting within the caps, reading and parsing as bytes
// arrive, the deadlines, and the answers the loop gives itself.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "serve/connection.h"

namespace trident::serve {

namespace {

constexpr size_t kReadBytes = 64 << 10;
constexpr int kReadsPerWake = 4;  // then the next client's turn
// After an error answer, what the client still sends is read and dropped for this long, so
// it sees the answer instead of a reset (closing with unread bytes sends RST).
constexpr std::chrono::milliseconds kLinger{2000};

std::string peer_address(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET)
    inet_ntop(AF_INET, &((const sockaddr_in&)a).sin_addr, text, sizeof text);
  else if (a.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &((const sockaddr_in6&)a).sin6_addr, text, sizeof text);
  return text;
}

std::string seconds(std::chrono::milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", ms.count() / 1000.0);
  return text;
}

}  // namespace

void ConnectionLoop::accept_all() {
  while (true) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = ::accept4(listen_fd_, (sockaddr*)&addr, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      admit(fd, peer_address(addr));
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if ((errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
      // Out of descriptors: the spare one lets the client in to be closed at once, or the
      // listening socket would stay readable and spin the loop.
      ::close(spare_fd_);
      const int refused = ::accept(listen_fd_, nullptr, nullptr);
      if (refused >= 0) ::close(refused);
      spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    return;
  }
}

void ConnectionLoop::admit(int fd, const std::string& peer) {
  if (!make_room(peer)) {
    write_now(fd, whole_response(errors_(503, "the server is at its connection limit"), false));
    ::close(fd);
    return;
  }
  const int one = 1;  // a streamed token goes out at once
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto c = std::make_unique<Connection>(fd, peer, accepted_++, limits_);
  c->deadline = Clock::now() + options_.idle_timeout;
  watch(epoll_fd_, fd);
  ++per_client_[peer];
  connections_[fd] = std::move(c);
}

// A new client over a cap sheds the oldest connection still sending its request (or idle)
// of that address, or of all; connections whose request a worker answers are kept.
bool ConnectionLoop::make_room(const std::string& peer) {
  auto it = per_client_.find(peer);
  if (it != per_client_.end() && it->second >= options_.max_connections_per_client &&
      !shed_oldest(&peer))
    return false;
  return (int)connections_.size() < options_.max_connections || shed_oldest(nullptr);
}

bool ConnectionLoop::shed_oldest(const std::string* peer) {
  Connection* oldest = nullptr;
  for (auto& [fd, c] : connections_)
    if (!c->with_worker && (!peer || c->peer == *peer) && (!oldest || c->serial < oldest->serial))
      oldest = c.get();
  if (!oldest) return false;
  if (oldest->reading_request && !oldest->draining)
    write_now(oldest->fd,
              whole_response(errors_(503, "the server is at its connection limit"), false));
  close_connection(*oldest);
  return true;
}

void ConnectionLoop::on_readable(Connection& c) {
  if (c.with_worker) return;  // its worker owns it until it comes back
  char buf[kReadBytes];
  for (int i = 0; i < kReadsPerWake; ++i) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) return close_connection(c);  // the client closed, or the socket failed
    if (c.draining) continue;
    c.pending.append(buf, (size_t)n);
    if (!advance(c)) return;
  }
}

// Parses what arrived. False: the connection left the loop's reading (dispatched, refused).
bool ConnectionLoop::advance(Connection& c) {
  size_t used = 0;
  const RequestParser::State s = c.parser.feed(c.pending, &used);
  c.pending.erase(0, used);
  if (s == RequestParser::State::kError) {
    refuse(c, c.parser.error_status(), c.parser.error_message());
    return false;
  }
  if (s == RequestParser::State::kComplete) {
    dispatch(c);
    return false;
  }
  if (c.parser.wants_continue()) {
    write_now(c.fd, "HTTP/1.1 100 Continue\r\n\r\n");
    c.parser.continue_sent();
  }
  if (!c.reading_request && c.parser.started()) {
    c.reading_request = true;
    c.deadline = Clock::now() + options_.request_timeout;
  }
  return true;
}

// The error answer, then the connection only drains until the client closes or kLinger.
void ConnectionLoop::refuse(Connection& c, int status, const std::string& message) {
  write_now(c.fd, whole_response(errors_(status, message), false));
  ::shutdown(c.fd, SHUT_WR);
  c.draining = true;
  c.pending.clear();
  c.deadline = Clock::now() + kLinger;
}

void ConnectionLoop::expire() {
  const Clock::time_point now = Clock::now();
  std::vector<Connection*> late;
  for (auto& [fd, c] : connections_)
    if (!c->with_worker && c->deadline <= now) late.push_back(c.get());
  for (Connection* c : late) {
    if (c->reading_request && !c->draining)
      refuse(*c, 408,
             "the request did not arrive within " + seconds(options_.request_timeout) +
                 " (--request-timeout)");
    else
      close_connection(*c);
  }
}

}  // namespace trident::serve
