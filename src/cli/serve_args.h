#pragma once
// `trident serve`'s flags: the inference flags it shares with generate, the chat template,
// the listening address, and the limits every client is held to (body, connections, deadlines,
// prompt size, queue), the API key and the shutdown grace. Checked once by check_serve_args.
#include <CLI/CLI.hpp>
#include <string>

#include "cli/inference_args.h"
#include "cli/serve_chat.h"
#include "serve/http_server.h"

namespace trident::cli {

struct ServeArgs {
  InferenceArgs inference;
  ServeChatFlags chat;
  serve::HttpOptions http;
  int max_queue = 256;
  std::string model_name;
  std::string api_key_file;
  long max_prompt_tokens = 0;  // 0: the context (--max-sequence-length)
  long max_prompt_chars = 0;   // 0: 32 x the prompt token limit
  double request_timeout_s = 30, keep_alive_timeout_s = 5, shutdown_timeout_s = 30;
};

void add_serve_args(CLI::App& app, ServeArgs* a);

// Every rule broken by the flags, one per line (empty: none).
std::string check_serve_args(const ServeArgs& a, int world_size);

// After the check: the timeouts into the server's options, --api-key-file read into
// a.http.api_key (its first line). Empty, or why the key file cannot be used.
std::string resolve_serve_args(ServeArgs* a);

}  // namespace trident::cli
