#include "serve/http_parser.h"

#include <algorithm>
#include <cctype>

namespace trident::serve {

namespace {

constexpr size_t kMaxChunkLine = 4096;  // a chunk size and its extensions

bool is_token_char(char c) {
  return std::isalnum((unsigned char)c) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), is_token_char);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = (char)std::tolower((unsigned char)c);
  return out;
}

// A header value may hold visible characters, spaces, tabs and obs-text, no other controls.
bool is_field_value(std::string_view v) {
  return std::none_of(v.begin(), v.end(), [](char c) {
    const unsigned char u = (unsigned char)c;
    return (u < 0x20 && u != '\t') || u == 0x7f;
  });
}

// The next line of `text` from `pos` without its "\n" or "\r\n"; pos moves past it.
std::string_view next_line(std::string_view text, size_t* pos) {
  size_t end = text.find('\n', *pos);
  if (end == std::string_view::npos) end = text.size();
  std::string_view line = text.substr(*pos, end - *pos);
  *pos = std::min(text.size(), end + 1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

// Where the head ends ("\n\n" or "\n\r\n"), searching `head` from `from`; npos if not yet.
size_t head_end(std::string_view head, size_t from) {
  for (size_t i = head.find('\n', from); i != std::string_view::npos; i = head.find('\n', i + 1)) {
    if (i + 1 < head.size() && head[i + 1] == '\n') return i + 2;
    if (i + 2 < head.size() && head[i + 1] == '\r' && head[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

}  // namespace

const std::string* HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return &value;
  return nullptr;
}

RequestParser::State RequestParser::fail(int status, std::string message) {
  error_status_ = status;
  error_message_ = std::move(message);
  return State::kError;
}

void RequestParser::reset() {
  phase_ = Phase::kHead;
  head_.clear();
  trailer_bytes_ = body_left_ = 0;
  chunked_ = expect_continue_ = has_length_ = false;
  request_ = HttpRequest();
}

HttpRequest RequestParser::take() {
  HttpRequest r = std::move(request_);
  reset();
  return r;
}

RequestParser::State RequestParser::feed(std::string_view bytes, size_t* consumed) {
  *consumed = 0;
  while (error_status_ == 0) {
    if (phase_ == Phase::kDone) return State::kComplete;
    const std::string_view rest = bytes.substr(*consumed);
    const Phase before = phase_;
    size_t used = 0;
    State s = State::kNeedMore;
    if (phase_ == Phase::kHead)
      s = feed_head(rest, &used);
    else if (phase_ == Phase::kBody || phase_ == Phase::kChunkData)
      s = feed_body(rest, &used);
    else if (phase_ == Phase::kTrailers)
      s = feed_trailers(rest, &used);
    else
      s = feed_chunk_size(rest, &used);
    *consumed += used;
    if (s == State::kError) return s;
    if (phase_ == Phase::kDone) return State::kComplete;
    if (*consumed == bytes.size() || (used == 0 && phase_ == before)) return State::kNeedMore;
  }
  return State::kError;
}

RequestParser::State RequestParser::feed_head(std::string_view bytes, size_t* used) {
  size_t skipped = 0;
  if (head_.empty())  // empty lines before a request line are ignored (RFC 9112 2.2)
    while (skipped < bytes.size() && (bytes[skipped] == '\r' || bytes[skipped] == '\n')) ++skipped;
  bytes.remove_prefix(skipped);
  const size_t old = head_.size();
  head_.append(bytes.substr(0, limits_.max_head_bytes - old));
  const size_t end = head_end(head_, old < 2 ? 0 : old - 2);
  if (end == std::string::npos) {
    *used = skipped + (head_.size() - old);
    if (head_.size() >= limits_.max_head_bytes)
      return fail(
          431, "request head is larger than " + std::to_string(limits_.max_head_bytes) + " bytes");
    return State::kNeedMore;
  }
  head_.resize(end);
  *used = skipped + (end - old);
  return parse_head();
}

RequestParser::State RequestParser::parse_head() {
  size_t pos = 0;
  if (parse_request_line(next_line(head_, &pos)) == State::kError) return State::kError;
  for (std::string_view line = next_line(head_, &pos); !line.empty(); line = next_line(head_, &pos))
    if (parse_header_line(line) == State::kError) return State::kError;
  head_.clear();
  return start_body();
}

RequestParser::State RequestParser::parse_request_line(std::string_view line) {
  const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1)
    return fail(400, "malformed request line (want METHOD /path HTTP/1.1)");
  const std::string_view method = line.substr(0, sp1), version = line.substr(sp2 + 1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (!is_token(method)) return fail(400, "malformed request method");
  if (target.empty() || target.front() != '/' || target.find(' ') != std::string_view::npos ||
      !is_field_value(target))
    return fail(400, "malformed request target (want a path starting with /)");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    const bool http = version.size() == 8 && version.substr(0, 5) == "HTTP/";
    return fail(http ? 505 : 400, http ? "only HTTP/1.0 and HTTP/1.1 are served"
                                       : "malformed HTTP version in the request line");
  }
  request_.method = std::string(method);
  const size_t q = target.find('?');
  request_.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) request_.query = std::string(target.substr(q + 1));
  request_.keep_alive = version == "HTTP/1.1";
  return State::kNeedMore;
}

RequestParser::State RequestParser::parse_header_line(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t')
    return fail(400, "folded header lines are not accepted");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
    return fail(400, "malformed header line (want Name: value)");
  const std::string_view value = trim(line.substr(colon + 1));
  if (!is_field_value(value)) return fail(400, "control character in a header value");
  request_.headers.emplace_back(lower(line.substr(0, colon)), std::string(value));
  return State::kNeedMore;
}

}  // namespace trident::serve

namespace trident::serve {

namespace {

// `at_least`: a chunked body, refused once it passes the limit, before its end is known.
std::string body_too_large(size_t bytes, size_t limit, bool at_least) {
  return std::string("request body of ") + (at_least ? "at least " : "") + std::to_string(bytes) +
         " bytes is larger than --max-body-bytes (" + std::to_string(limit) + ")";
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

void RequestParser::apply_connection(std::string_view value) {
  for (size_t start = 0; start <= value.size();) {
    size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    const std::string option = lower(trim(value.substr(start, comma - start)));
    if (option == "close") request_.keep_alive = false;
    if (option == "keep-alive") request_.keep_alive = true;
    start = comma + 1;
  }
}

RequestParser::State RequestParser::start_body() {
  std::string coding;
  const std::string* length_field = nullptr;
  for (const auto& [name, value] : request_.headers) {
    if (name == "transfer-encoding") coding += (coding.empty() ? "" : ",") + lower(value);
    if (name == "connection") apply_connection(value);
    if (name == "expect") expect_continue_ = lower(value) == "100-continue";
    if (name != "content-length") continue;
    if (length_field && *length_field != value) return fail(400, "conflicting Content-Length");
    length_field = &value;
  }
  if (!coding.empty()) {
    if (length_field) return fail(400, "both Transfer-Encoding and Content-Length are given");
    if (coding != "chunked")
      return fail(coding.find("chunked") != std::string::npos ? 400 : 501,
                  "Transfer-Encoding '" + coding + "' is not served (only chunked)");
    chunked_ = true;
    phase_ = Phase::kChunkSize;
    return State::kNeedMore;
  }
  if (length_field && (!all_digits(*length_field) || length_field->size() > 18))
    return fail(400, "malformed Content-Length '" + *length_field + "'");
  const size_t length = length_field ? std::stoull(*length_field) : 0;
  if (length > limits_.max_body_bytes)
    return fail(413, body_too_large(length, limits_.max_body_bytes, false));
  body_left_ = length;
  request_.body.reserve(length);
  phase_ = length > 0 ? Phase::kBody : Phase::kDone;
  return State::kNeedMore;
}

RequestParser::State RequestParser::feed_body(std::string_view bytes, size_t* used) {
  const size_t n = std::min(body_left_, bytes.size());
  request_.body.append(bytes.data(), n);
  body_left_ -= n;
  *used = n;
  if (n > 0) expect_continue_ = false;  // the client sends without waiting
  if (body_left_ == 0) phase_ = chunked_ ? Phase::kChunkDataEnd : Phase::kDone;
  return State::kNeedMore;
}

bool RequestParser::gather_line(std::string_view bytes, size_t* used, size_t max_line) {
  const size_t nl = bytes.find('\n');
  const size_t n = nl == std::string_view::npos ? bytes.size() : nl + 1;
  *used = std::min(n, max_line + 1 - std::min(max_line + 1, head_.size()));
  head_.append(bytes.substr(0, *used));
  return *used == n && nl != std::string_view::npos;
}

RequestParser::State RequestParser::feed_chunk_size(std::string_view bytes, size_t* used) {
  const bool complete = gather_line(bytes, used, kMaxChunkLine);
  if (head_.size() > kMaxChunkLine) return fail(400, "chunk-size line is longer than 4096 bytes");
  if (!complete) return State::kNeedMore;
  size_t pos = 0;
  const std::string line(next_line(head_, &pos));
  head_.clear();
  if (phase_ == Phase::kChunkSize) return chunk_size_line(line);
  if (!line.empty()) return fail(400, "chunk data is longer than its chunk size");
  phase_ = Phase::kChunkSize;
  return State::kNeedMore;
}

RequestParser::State RequestParser::chunk_size_line(std::string_view line) {
  size_t digits = 0, size = 0;
  while (digits < line.size() && hex_value(line[digits]) >= 0) {
    if (size > (limits_.max_body_bytes | 0xffff))  // stops growing long before overflow
      return fail(413, body_too_large(request_.body.size() + size, limits_.max_body_bytes, true));
    size = size * 16 + (size_t)hex_value(line[digits++]);
  }
  const std::string_view rest = trim(line.substr(digits));
  if (digits == 0 || (!rest.empty() && rest.front() != ';'))
    return fail(400, "malformed chunk size");
  if (size == 0) {
    phase_ = Phase::kTrailers;
    return State::kNeedMore;
  }
  if (size > limits_.max_body_bytes - request_.body.size())
    return fail(413, body_too_large(request_.body.size() + size, limits_.max_body_bytes, true));
  body_left_ = size;
  phase_ = Phase::kChunkData;
  return State::kNeedMore;
}

RequestParser::State RequestParser::feed_trailers(std::string_view bytes, size_t* used) {
  const size_t room = limits_.max_head_bytes - std::min(limits_.max_head_bytes, trailer_bytes_);
  const bool complete = gather_line(bytes, used, room);
  if (head_.size() > room)
    return fail(431, "chunked trailers are larger than " + std::to_string(limits_.max_head_bytes) +
                         " bytes");
  if (!complete) return State::kNeedMore;
  trailer_bytes_ += head_.size();
  const bool last = head_ == "\n" || head_ == "\r\n";
  head_.clear();
  if (last) phase_ = Phase::kDone;  // trailer fields themselves are not used
  return State::kNeedMore;
}

}  // namespace trident::serve
