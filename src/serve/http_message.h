#pragma once
// One HTTP/1.1 request as the front end hands it to a handler, and the answer a handler
// gives back: a whole body, or a stream of chunks (server-sent events) that a provider
// writes until it says the stream is done.
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace trident::serve {

struct HttpRequest {
  std::string method;                                        // "GET", "PUT", ...
  std::string path;                                          // the target without its query
  std::string query;                                         // after '?', or empty
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;                                          // de-chunked
  bool keep_alive = true;

  // The value of a header (the first, when repeated), or nullptr.
  const std::string* header(std::string_view lower_name) const;
};

// What a stream provider is given: put() writes one chunk and says false once the client is
// gone; the provider answers whether the stream goes on.
enum class StreamStep { kMore, kDone, kFailed };
using ChunkWriter = std::function<bool(std::string_view)>;
using StreamProvider = std::function<StreamStep(const ChunkWriter& put)>;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones
  std::string body;
  StreamProvider stream;  // set: the body is chunked, written by the provider
  // Called once a stream ends: true when it was written to its end, false when the client
  // went away or the server stopped it first.
  std::function<void(bool completed)> on_stream_end;
};

// "Not Found" for 404 and the like; "Unknown" for a status it does not know.
const char* status_reason(int status);

}  // namespace trident::serve
