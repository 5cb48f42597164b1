#include "serve/http_writer.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

namespace trident::serve {

const char* status_reason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

std::string response_head(const HttpResponse& r, bool keep_alive) {
  std::string h = "HTTP/1.1 " + std::to_string(r.status) + " " + status_reason(r.status) + "\r\n";
  h += "Content-Type: " + r.content_type + "\r\n";
  if (r.stream)
    h += "Transfer-Encoding: chunked\r\n";
  else
    h += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  for (const auto& [name, value] : r.headers) h += name + ": " + value + "\r\n";
  return h + "\r\n";
}

std::string whole_response(const HttpResponse& r, bool keep_alive) {
  return response_head(r, keep_alive) + r.body;
}

bool write_all(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix((size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, (int)std::min<long long>(left.count(), 1000)) < 0 && errno != EINTR)
      return false;
  }
  return true;
}

namespace {

bool write_stream(int fd, const HttpResponse& r, Clock::duration timeout) {
  bool client_there = true;
  const ChunkWriter put = [&](std::string_view chunk) {
    if (chunk.empty() || !client_there) return client_there;
    char size[24];
    const int len = std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
    const Clock::time_point deadline = Clock::now() + timeout;
    client_there = write_all(fd, std::string_view(size, (size_t)len), deadline) &&
                   write_all(fd, chunk, deadline) && write_all(fd, "\r\n", deadline);
    return client_there;
  };
  StreamStep step = StreamStep::kMore;
  while (step == StreamStep::kMore && client_there) step = r.stream(put);
  const bool completed = step == StreamStep::kDone && client_there &&
                         write_all(fd, "0\r\n\r\n", Clock::now() + timeout);
  if (r.on_stream_end) r.on_stream_end(completed);
  return completed;
}

}  // namespace

bool write_response(int fd, const HttpResponse& r, bool keep_alive, Clock::duration timeout) {
  if (!write_all(fd, response_head(r, keep_alive), Clock::now() + timeout)) {
    if (r.on_stream_end) r.on_stream_end(false);
    return false;
  }
  if (r.stream) return write_stream(fd, r, timeout);
  return write_all(fd, r.body, Clock::now() + timeout);
}

void write_now(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) return;
    data.remove_prefix((size_t)n);
  }
}

}  // namespace trident::serve
