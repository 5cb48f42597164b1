#pragma once
// What the HTTP handlers share: the engine, the tokenizer, the limits requests are checked
// against, the served model's name, and a source of fresh seeds. Handlers are functions of
// (Service, request, response), one file per API.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "serve/engine.h"
#include "serve/http_message.h"
#include "serve/sequences.h"

namespace trident::serve {

class Service {
 public:
  Service(Engine& engine, const tokenizer::Tokenizer& tok, ModelLimits limits,
          std::string model_name);

  Engine& engine;
  const tokenizer::Tokenizer& tok;
  const ModelLimits limits;
  const std::string model_name;
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

}  // namespace trident::serve
