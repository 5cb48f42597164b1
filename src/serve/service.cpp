#include "serve/service.h"

#include <chrono>
#include <random>

namespace trident::serve {

Service::Service(Engine& engine, const tokenizer::Tokenizer& tok, ModelLimits limits,
                 std::string model_name, ChatSetup chat)
    : engine(engine),
      tok(tok),
      limits(limits),
      model_name(std::move(model_name)),
      chat(std::move(chat)),
      started(std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count()),
      seed_base_(((std::uint64_t)std::random_device{}() << 32) ^ std::random_device{}()) {}

std::uint64_t Service::fresh_seed() {
  return sequence_seed(seed_base_, 1 + seed_counter_.fetch_add(1));
}

ApiError Service::check_with_model(const std::vector<generation::GenerationRequest>& seqs) const {
  for (size_t i = 0; i < seqs.size(); ++i) {
    std::string why = engine.validate(seqs[i]);
    if (!why.empty()) return bad_request("", "sequence " + std::to_string(i) + ": " + why);
  }
  return {};
}

void send_error(HttpResponse& res, const ApiError& e) {
  res.status = e.status;
  res.content_type = "application/json";
  res.body = error_json(e);
}

void send_json(HttpResponse& res, const std::string& body) {
  res.status = 200;
  res.content_type = "application/json";
  res.body = body;
}

}  // namespace trident::serve
