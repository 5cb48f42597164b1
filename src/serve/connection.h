#pragma once
// One client connection of ConnectionLoop (its .cpp files only). The loop thread owns it,
// except while a worker answers its request (with_worker).
#include <cstdint>
#include <string>

#include "serve/connection_loop.h"
#include "serve/http_writer.h"

namespace trident::serve {

struct ConnectionLoop::Connection {
  Connection(int fd, std::string peer, std::uint64_t serial, const HttpLimits& limits)
      : fd(fd), peer(std::move(peer)), serial(serial), parser(limits) {}
  int fd;
  std::string peer;
  std::uint64_t serial;  // accept order: the oldest is shed first
  RequestParser parser;
  std::string pending;  // read, not yet parsed (the start of a pipelined request)
  Clock::time_point deadline;
  bool reading_request = false;  // its first byte arrived: the request deadline runs
  bool with_worker = false;
  bool draining = false;  // answered with an error; reading what still comes, then closed
  HttpRequest request;
  bool reusable = false;  // the worker's verdict: answered, and kept alive
};

// Adds `fd` to the epoll set, readable events.
void watch(int epoll_fd, int fd);

}  // namespace trident::serve
