// The HTTP/1.1 request parser against RFC 9112's rules: whole, byte-at-a-time and pipelined
// input give the same requests; chunked bodies decode as the RFC's coding defines (the
// chunks below are written out by hand); every limit is enforced while bytes arrive, before
// the bytes past it are read.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve/http_parser.h"

namespace trident::serve {
namespace {

using State = RequestParser::State;

struct Parsed {
  State state = State::kNeedMore;
  HttpRequest request;
  size_t consumed = 0;  // bytes of the input the request took
  int status = 0;
};

Parsed parse_whole(const std::string& bytes, HttpLimits limits = {}) {
  RequestParser p(limits);
  Parsed out;
  out.state = p.feed(bytes, &out.consumed);
  if (out.state == State::kComplete) out.request = p.take();
  out.status = p.error_status();
  return out;
}

// One byte per feed, as the slowest client sends.
Parsed parse_bytewise(const std::string& bytes, HttpLimits limits = {}) {
  RequestParser p(limits);
  Parsed out;
  for (size_t i = 0; i < bytes.size() && out.state == State::kNeedMore; ++i) {
    size_t used = 0;
    out.state = p.feed(std::string_view(bytes).substr(i, 1), &used);
    out.consumed += used;
  }
  if (out.state == State::kComplete) out.request = p.take();
  out.status = p.error_status();
  return out;
}

void expect_same(const Parsed& a, const Parsed& b) {
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.status, b.status);
  EXPECT_EQ(a.consumed, b.consumed);
  EXPECT_EQ(a.request.method, b.request.method);
  EXPECT_EQ(a.request.path, b.request.path);
  EXPECT_EQ(a.request.body, b.request.body);
  EXPECT_EQ(a.request.headers, b.request.headers);
  EXPECT_EQ(a.request.keep_alive, b.request.keep_alive);
}

TEST(HttpParser, ParsesRequestLineHeadersAndQuery) {
  const std::string req =
      "GET /v1/models?x=1&y=2 HTTP/1.1\r\nHost: localhost:5000\r\nX-Thing:   a b  \r\n\r\n";
  Parsed p = parse_whole(req);
  ASSERT_EQ(p.state, State::kComplete);
  EXPECT_EQ(p.consumed, req.size());
  EXPECT_EQ(p.request.method, "GET");
  EXPECT_EQ(p.request.path, "/v1/models");
  EXPECT_EQ(p.request.query, "x=1&y=2");
  ASSERT_NE(p.request.header("x-thing"), nullptr);
  EXPECT_EQ(*p.request.header("x-thing"), "a b");  // optional whitespace trimmed
  EXPECT_EQ(*p.request.header("host"), "localhost:5000");
  EXPECT_TRUE(p.request.keep_alive);  // HTTP/1.1's default
  expect_same(p, parse_bytewise(req));
}

TEST(HttpParser, KeepAliveFollowsVersionAndConnection) {
  EXPECT_FALSE(parse_whole("GET / HTTP/1.1\r\nConnection: close\r\n\r\n").request.keep_alive);
  EXPECT_FALSE(parse_whole("GET / HTTP/1.0\r\n\r\n").request.keep_alive);
  EXPECT_TRUE(parse_whole("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").request.keep_alive);
  EXPECT_FALSE(parse_whole("GET / HTTP/1.1\r\nConnection: te, close\r\n\r\n").request.keep_alive);
}

TEST(HttpParser, ContentLengthBodyWholeAndBytewise) {
  const std::string body = "{\"prompt\": \"hello\"}";
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  Parsed p = parse_whole(req);
  ASSERT_EQ(p.state, State::kComplete);
  EXPECT_EQ(p.request.body, body);
  expect_same(p, parse_bytewise(req));
}

TEST(HttpParser, LineEndingsMayBeBareLineFeeds) {
  Parsed p = parse_whole("\r\n\nPUT /api HTTP/1.1\nContent-Length: 2\n\nab");
  ASSERT_EQ(p.state, State::kComplete);  // leading empty lines ignored (RFC 9112 2.2)
  EXPECT_EQ(p.request.method, "PUT");
  EXPECT_EQ(p.request.body, "ab");
}

TEST(HttpParser, PipelinedRequestsEachTakeTheirOwnBytes) {
  const std::string first = "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
  const std::string second = "GET /b HTTP/1.1\r\n\r\n";
  RequestParser p(HttpLimits{});
  size_t used = 0;
  ASSERT_EQ(p.feed(first + second, &used), State::kComplete);
  EXPECT_EQ(used, first.size());
  EXPECT_EQ(p.take().body, "abc");
  ASSERT_EQ(p.feed(second, &used), State::kComplete);
  EXPECT_EQ(p.take().path, "/b");
}

// RFC 9112 7.1: chunk = hex size [; extensions] CRLF data CRLF; last-chunk "0"; trailers.
TEST(HttpParser, ChunkedBodyDecodesWithExtensionsAndTrailers) {
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4\r\nWiki\r\n"
      "6;name=value\r\npedia \r\n"
      "E\r\nin \r\n\r\nchunks.\r\n"
      "0\r\nExpires: never\r\n\r\n";
  Parsed p = parse_whole(req);
  ASSERT_EQ(p.state, State::kComplete);
  EXPECT_EQ(p.request.body, "Wikipedia in \r\n\r\nchunks.");
  EXPECT_EQ(p.consumed, req.size());
  expect_same(p, parse_bytewise(req));
}

TEST(HttpParser, ExpectContinueIsAskedOnlyBeforeTheBody) {
  RequestParser p(HttpLimits{});
  size_t used = 0;
  const std::string head = "PUT /api HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n";
  ASSERT_EQ(p.feed(head, &used), State::kNeedMore);
  EXPECT_TRUE(p.wants_continue());
  p.continue_sent();
  EXPECT_FALSE(p.wants_continue());
  ASSERT_EQ(p.feed("body", &used), State::kComplete);
  // A client that sends its body without waiting is not sent a late 100.
  RequestParser q(HttpLimits{});
  ASSERT_EQ(q.feed(head + "bo", &used), State::kNeedMore);
  EXPECT_FALSE(q.wants_continue());
}

struct BadRequest {
  std::string bytes;
  int status;
};

TEST(HttpParser, MalformedRequestsGetTheirStatus) {
  const std::vector<BadRequest> cases = {
      {"GET\r\n\r\n", 400},
      {"GET /\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\n\r\n", 505},
      {"GET / HTTX/1.1\r\n\r\n", 400},
      {"GET nopath HTTP/1.1\r\n\r\n", 400},
      {"G(T / HTTP/1.1\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nNo-Colon\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nSpace : before colon\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400},
      {std::string("GET / HTTP/1.1\r\nA: b\0c\r\n\r\n", 27), 400},
      {"POST / HTTP/1.1\r\nContent-Length: 12a\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2 x\r\n", 400},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", 400},
  };
  for (const BadRequest& c : cases) {
    Parsed whole = parse_whole(c.bytes), bytewise = parse_bytewise(c.bytes);
    EXPECT_EQ(whole.state, State::kError) << c.bytes;
    EXPECT_EQ(whole.status, c.status) << c.bytes;
    EXPECT_EQ(bytewise.status, c.status) << c.bytes;
  }
}

TEST(HttpParser, HeadOverTheLimitIsRefusedAtTheLimit) {
  HttpLimits limits;
  limits.max_head_bytes = 1024;
  const std::string endless = "GET / HTTP/1.1\r\nX-Drip: " + std::string(100000, 'a');
  Parsed p = parse_bytewise(endless, limits);
  EXPECT_EQ(p.state, State::kError);
  EXPECT_EQ(p.status, 431);
  EXPECT_LE(p.consumed, 1024u);  // nothing past the limit was taken
}

TEST(HttpParser, ContentLengthOverTheLimitIsRefusedBeforeTheBody) {
  HttpLimits limits;
  limits.max_body_bytes = 1000;
  RequestParser p(limits);
  size_t used = 0;
  EXPECT_EQ(p.feed("POST / HTTP/1.1\r\nContent-Length: 1001\r\n\r\n", &used), State::kError);
  EXPECT_EQ(p.error_status(), 413);
  EXPECT_NE(p.error_message().find("1001 bytes is larger than --max-body-bytes (1000)"),
            std::string::npos)
      << p.error_message();
  EXPECT_EQ(parse_whole("POST / HTTP/1.1\r\nContent-Length: 1000\r\n\r\n" + std::string(1000, 'x'),
                        limits)
                .state,
            State::kComplete);
}

// A chunked body is refused at the first chunk that would pass the limit, however the
// chunks are cut: the parser never holds more than the limit.
TEST(HttpParser, ChunkedBodyOverTheLimitIsRefusedAsItArrives) {
  HttpLimits limits;
  limits.max_body_bytes = 10000;
  for (size_t chunk : {1u, 100u, 4096u, 9999u, 10000u, 10001u}) {
    RequestParser p(limits);
    size_t used = 0, fed = 0;
    State s = p.feed("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &used);
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", chunk);
    const std::string piece = size + std::string(chunk, 'x') + "\r\n";
    while (s == State::kNeedMore && fed < 100000) {
      s = p.feed(piece, &used);
      fed += chunk;
    }
    EXPECT_EQ(s, State::kError) << chunk;
    EXPECT_EQ(p.error_status(), 413) << chunk;
    EXPECT_LE(fed, limits.max_body_bytes + chunk) << chunk;
  }
  const std::string huge =
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffffff\r\n";
  EXPECT_EQ(parse_whole(huge, limits).status, 413);  // a size past 64 bits does not wrap
}

TEST(HttpParser, ChunkedTrailersAreBounded) {
  HttpLimits limits;
  limits.max_head_bytes = 1024;
  std::string req = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n";
  for (int i = 0; i < 200; ++i) req += "X-Trailer: 0123456789\r\n";
  EXPECT_EQ(parse_bytewise(req, limits).status, 431);
}

TEST(HttpParser, ErrorsAreFinal) {
  RequestParser p(HttpLimits{});
  size_t used = 0;
  EXPECT_EQ(p.feed("BAD\r\n\r\n", &used), State::kError);
  EXPECT_EQ(p.feed("GET / HTTP/1.1\r\n\r\n", &used), State::kError);
  EXPECT_EQ(used, 0u);
}

}  // namespace
}  // namespace trident::serve
