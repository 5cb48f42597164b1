#pragma once
// An incremental HTTP/1.1 request parser (RFC 9112): bytes in as they arrive, one request
// out when its head and body are complete. Every limit is checked as bytes arrive, so a
// client cannot make the server hold more than the limits whatever it sends: the head is
// capped, a Content-Length over the body limit is refused before its body is read, and a
// chunked body is refused as soon as its decoded size would pass the limit.
// Pure (no sockets); the fuzz target drives it with any bytes.
#include <cstddef>
#include <string>
#include <string_view>

#include "serve/http_message.h"

namespace trident::serve {

struct HttpLimits {
  size_t max_head_bytes = 16 << 10;  // request line + headers (and a chunked body's trailers)
  size_t max_body_bytes = 1 << 20;   // the decoded body
};

class RequestParser {
 public:
  enum class State { kNeedMore, kComplete, kError };

  explicit RequestParser(const HttpLimits& limits) : limits_(limits) {}

  // Consumes a prefix of `bytes` (*consumed says how much; what follows a complete request
  // belongs to the next one). kComplete: take() the request. kError: the connection is
  // answered error_status() and closed; later calls keep returning kError.
  State feed(std::string_view bytes, size_t* consumed);
  // The complete request; the parser is ready for the next one.
  HttpRequest take();

  // The request's head is parsed and asks "Expect: 100-continue" for a body not yet sent.
  bool wants_continue() const { return phase_ > Phase::kHead && expect_continue_; }
  void continue_sent() { expect_continue_ = false; }
  // Any byte of a request arrived (an idle keep-alive connection has none).
  bool started() const { return phase_ != Phase::kHead || !head_.empty(); }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

 private:
  enum class Phase { kHead, kBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kDone };
  State fail(int status, std::string message);
  State feed_head(std::string_view bytes, size_t* used);
  State parse_head();
  State parse_request_line(std::string_view line);
  State parse_header_line(std::string_view line);
  State start_body();
  State feed_body(std::string_view bytes, size_t* used);
  State feed_chunk_size(std::string_view bytes, size_t* used);
  State chunk_size_line(std::string_view line);
  State feed_trailers(std::string_view bytes, size_t* used);
  bool gather_line(std::string_view bytes, size_t* used, size_t max_line);
  void apply_connection(std::string_view value);
  void reset();

  HttpLimits limits_;
  Phase phase_ = Phase::kHead;
  std::string head_;  // the head (or a chunk-size / trailer line) gathered so far
  size_t trailer_bytes_ = 0;
  size_t body_left_ = 0;  // Content-Length or the current chunk's bytes still to come
  bool chunked_ = false, expect_continue_ = false, has_length_ = false;
  HttpRequest request_;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace trident::serve
