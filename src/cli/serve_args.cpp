#include "cli/serve_args.h"

#include <algorithm>
#include <chrono>
#include <fstream>

namespace trident::cli {

namespace {

void add_server_args(CLI::App& app, ServeArgs* a) {
  const char* S = "Server";
  app.add_option("--host", a->http.host, "address to listen on")->group(S)->capture_default_str();
  app.add_option("--port", a->http.port, "port to listen on (0: any free port, printed)")
      ->group(S)
      ->capture_default_str();
  app.add_option("--model-name", a->model_name,
                 "the model's name in /v1/models and answers (default: the --load/--load-hf "
                 "directory's name)")
      ->group(S);
  app.add_option("--api-key", a->http.api_key,
                 "require 'Authorization: Bearer KEY' on /api and /v1/ (else HTTP 401); the "
                 "command line is visible to other users, --api-key-file is not")
      ->group(S);
  app.add_option("--api-key-file", a->api_key_file,
                 "as --api-key, the key being the first line of this file")
      ->group(S);
  app.add_option("--shutdown-timeout", a->shutdown_timeout_s,
                 "seconds SIGINT/SIGTERM waits for running requests to finish before "
                 "cancelling them (a second signal cancels at once)")
      ->group(S)
      ->capture_default_str();
}

void add_limit_args(CLI::App& app, ServeArgs* a) {
  const char* L = "Client limits";
  app.add_option("--max-queue", a->max_queue,
                 "requests waiting for a KV-cache slot; more get HTTP 503")
      ->group(L)
      ->capture_default_str();
  app.add_option("--max-body-bytes", a->http.limits.max_body_bytes,
                 "largest request body, counted as it arrives (chunked too); larger get HTTP 413")
      ->group(L)
      ->capture_default_str();
  app.add_option("--max-prompt-tokens", a->max_prompt_tokens,
                 "longest prompt in tokens (default: the context); longer get HTTP 400")
      ->group(L);
  app.add_option("--max-prompt-chars", a->max_prompt_chars,
                 "longest prompt in bytes, refused before tokenizing (default: 32 x "
                 "--max-prompt-tokens)")
      ->group(L);
  app.add_option("--max-connections", a->http.connections.max_connections,
                 "connections open at once; a new one sheds the oldest that has not sent a "
                 "whole request")
      ->group(L)
      ->capture_default_str();
  app.add_option("--max-connections-per-client", a->http.connections.max_connections_per_client,
                 "connections open at once from one address")
      ->group(L)
      ->capture_default_str();
  app.add_option("--request-timeout", a->request_timeout_s,
                 "seconds for a request's head and body to arrive, from its first byte "
                 "(else HTTP 408); also each write of an answer")
      ->group(L)
      ->capture_default_str();
  app.add_option("--keep-alive-timeout", a->keep_alive_timeout_s,
                 "seconds an idle connection waits for its next request")
      ->group(L)
      ->capture_default_str();
}

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds((long long)(seconds * 1000));
}

// An API key is sent in a header: visible ASCII, no spaces.
bool valid_key(const std::string& key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) {
    return (unsigned char)ch > 0x20 && (unsigned char)ch < 0x7f;
  });
}

}  // namespace

void add_serve_args(CLI::App& app, ServeArgs* a) {
  add_inference_args(app, &a->inference);
  add_serve_chat_args(app, &a->chat);
  add_server_args(app, a);
  add_limit_args(app, a);
}

std::string check_serve_args(const ServeArgs& a, int world_size) {
  std::string errors = check_inference_args(a.inference, world_size);
  const auto& c = a.http.connections;
  if (a.http.port < 0 || a.http.port > 65535) errors += "--port must be in [0, 65535]\n";
  if (a.http.host.empty()) errors += "--host must not be empty\n";
  if (a.max_queue < 1 || a.max_queue > 100000) errors += "--max-queue must be in [1, 100000]\n";
  if (a.http.limits.max_body_bytes < 1024 || a.http.limits.max_body_bytes > (1ul << 30))
    errors += "--max-body-bytes must be in [1024, 1073741824]\n";
  if (a.max_prompt_tokens < 0) errors += "--max-prompt-tokens must be at least 1\n";
  if (a.max_prompt_chars < 0) errors += "--max-prompt-chars must be at least 1\n";
  if (c.max_connections < 1 || c.max_connections > 1000000)
    errors += "--max-connections must be in [1, 1000000]\n";
  if (c.max_connections_per_client < 1)
    errors += "--max-connections-per-client must be at least 1\n";
  for (auto [flag, value] : {std::pair{"--request-timeout", a.request_timeout_s},
                             {"--keep-alive-timeout", a.keep_alive_timeout_s},
                             {"--shutdown-timeout", a.shutdown_timeout_s}})
    if (!(value > 0 && value <= 86400)) errors += std::string(flag) + " must be in (0, 86400]\n";
  if (!a.http.api_key.empty() && !a.api_key_file.empty())
    errors += "give --api-key or --api-key-file, not both\n";
  if (!a.http.api_key.empty() && !valid_key(a.http.api_key))
    errors += "--api-key must be visible ASCII characters, no spaces\n";
  return errors;
}

std::string resolve_serve_args(ServeArgs* a) {
  auto& c = a->http.connections;
  c.request_timeout = c.write_timeout = millis(a->request_timeout_s);
  c.idle_timeout = millis(a->keep_alive_timeout_s);
  if (a->api_key_file.empty()) return "";
  std::ifstream in(a->api_key_file);
  std::string key;
  if (!in || !std::getline(in, key))
    return "--api-key-file " + a->api_key_file + ": cannot read it, or it is empty\n";
  if (!key.empty() && key.back() == '\r') key.pop_back();
  if (!valid_key(key))
    return "--api-key-file " + a->api_key_file +
           ": its first line must be the key: visible ASCII characters, no spaces\n";
  a->http.api_key = key;
  return "";
}

}  // namespace trident::cli
