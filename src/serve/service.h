#pragma once
// What the HTTP handlers share: the engine, the tokenizer, the limits requests are checked
// against, the served model's name, the chat template, and a source of fresh seeds. Handlers are
// functions of (Service, request, response), one file per API.
#include <atomic>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat_template/chat_template.h"
#include "serve/engine.h"
#include "serve/http_message.h"
#include "serve/sequences.h"

namespace trident::serve {

// What /v1/chat/completions renders messages with: serve's --chat-template, or the model's
// own. Without one that route answers 400 chat_template_missing with `missing`.
struct ChatSetup {
  std::shared_ptr<const chat_template::ChatTemplate> chat_template;  // null: none
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();  // --chat-template-kwargs
  std::string missing;  // why there is none, and how to give one
};

class Service {
 public:
  Service(Engine& engine, const tokenizer::Tokenizer& tok, ModelLimits limits,
          std::string model_name, ChatSetup chat = {});

  Engine& engine;
  const tokenizer::Tokenizer& tok;
  const ModelLimits limits;
  const std::string model_name;
  const ChatSetup chat;
  const std::int64_t started;  // unix seconds, the models' "created"

  // A seed for a request that gave none: distinct per call, not reproducible.
  std::uint64_t fresh_seed();
  // The generator's own check of every sequence (vocabulary, lengths, sampling).
  ApiError check_with_model(const std::vector<generation::GenerationRequest>& seqs) const;

 private:
  const std::uint64_t seed_base_;
  std::atomic<std::uint64_t> seed_counter_{0};
};

void send_error(HttpResponse& res, const ApiError& e);
void send_json(HttpResponse& res, const std::string& body);

void handle_megatron(Service& s, const HttpRequest& req, HttpResponse& res);
void handle_completion(Service& s, const HttpRequest& req, HttpResponse& res);
void handle_chat_completion(Service& s, const HttpRequest& req, HttpResponse& res);

}  // namespace trident::serve
