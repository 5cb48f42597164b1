#pragma once
// Writing answers to a client socket (non-blocking, written with MSG_NOSIGNAL): whole
// bodies with Content-Length, streams with chunked transfer coding. Every write has a
// deadline, so a client that stops reading cannot hold a worker thread.
#include <chrono>
#include <string>
#include <string_view>

#include "serve/http_message.h"

namespace trident::serve {

using Clock = std::chrono::steady_clock;

// The status line and headers (Content-Length, or Transfer-Encoding: chunked for a stream).
std::string response_head(const HttpResponse& r, bool keep_alive);

// The head and body of a response that is not a stream, as one string.
std::string whole_response(const HttpResponse& r, bool keep_alive);

// All of `data`, waiting for the socket while it is full; false when the client is gone or
// `deadline` passed.
bool write_all(int fd, std::string_view data, Clock::time_point deadline);

// The whole response; each write (each chunk of a stream) gets `timeout`. Calls the
// response's on_stream_end. False: the connection cannot be used again.
bool write_response(int fd, const HttpResponse& r, bool keep_alive, Clock::duration timeout);

// What fits into the socket now, without waiting (the answers the event loop gives itself).
void write_now(int fd, std::string_view data);

}  // namespace trident::serve
