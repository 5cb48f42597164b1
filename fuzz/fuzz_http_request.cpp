// The bytes a client sends `trident serve` (serve/http_parser): any input, fed whole or cut
// into pieces of any size, gives the same requests and the same final error; every request
// is within the limits (body, path) and every error is a 4xx/5xx the server answers.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "serve/http_parser.h"

namespace {

using trident::serve::HttpLimits;
using trident::serve::HttpRequest;
using trident::serve::RequestParser;

struct Outcome {
  std::vector<HttpRequest> requests;
  int error = 0;
};

void check_request(const HttpRequest& r, const HttpLimits& limits) {
  FUZZ_CHECK(!r.method.empty() && !r.path.empty() && r.path.front() == '/');
  FUZZ_CHECK(r.body.size() <= limits.max_body_bytes);
  for (const auto& [name, value] : r.headers)
    for (char c : name) FUZZ_CHECK(!(c >= 'A' && c <= 'Z'));
}

// Feeds `input` in pieces of `piece` bytes (0: whole), taking every pipelined request.
Outcome parse(std::string_view input, size_t piece, const HttpLimits& limits) {
  RequestParser p(limits);
  Outcome out;
  std::string pending;
  for (size_t at = 0; at < input.size() && out.error == 0;) {
    const size_t n = piece == 0 ? input.size() : std::min(piece, input.size() - at);
    pending.append(input.substr(at, n));
    at += n;
    while (out.error == 0) {
      size_t used = 0;
      const RequestParser::State s = p.feed(pending, &used);
      FUZZ_CHECK(used <= pending.size());
      pending.erase(0, used);
      if (s == RequestParser::State::kError) {
        out.error = p.error_status();
        FUZZ_CHECK(out.error >= 400 && out.error <= 505 && !p.error_message().empty());
      } else if (s == RequestParser::State::kComplete) {
        out.requests.push_back(p.take());
        check_request(out.requests.back(), limits);
      } else {
        break;
      }
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  if (size < 1) return 0;
  HttpLimits limits;
  limits.max_head_bytes = 256;
  limits.max_body_bytes = 64;
  const size_t piece = 1 + data[0] % 16;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const Outcome whole = parse(input, 0, limits), cut = parse(input, piece, limits);
  FUZZ_CHECK(whole.error == cut.error);
  FUZZ_CHECK(whole.requests.size() == cut.requests.size());
  for (size_t i = 0; i < whole.requests.size(); ++i) {
    FUZZ_CHECK(whole.requests[i].body == cut.requests[i].body);
    FUZZ_CHECK(whole.requests[i].headers == cut.requests[i].headers);
    FUZZ_CHECK(whole.requests[i].path == cut.requests[i].path);
  }
  return 0;
}
