// The bodies `trident serve` accepts (Megatron's PUT /api, OpenAI's POST /v1/completions and
// /v1/chat/completions):
// any bytes get either a request whose every field is within its documented range, or a 4xx
// error with a message and a JSON body that parses; an accepted request then becomes
// sequences that fit the context (the tokenizer included, as the server runs it).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "serve/chat_request.h"
#include "serve/completion_request.h"
#include "serve/megatron_request.h"
#include "serve/sequences.h"
#include "tokenizer/gpt2_tokenizer.h"

namespace {

using namespace trident;

const tokenizer::GPT2Tokenizer& tok() {
  static tokenizer::GPT2Tokenizer t(fuzz::gpt2_file("encoder.json"), fuzz::gpt2_file("vocab.bpe"));
  return t;
}

void check_error(const serve::ApiError& e) {
  FUZZ_CHECK(e.status == 400 && !e.message.empty());
  const nlohmann::json body = nlohmann::json::parse(serve::error_json(e));
  FUZZ_CHECK(body["error"]["message"].is_string() && body["error"]["type"].is_string());
}

void check_sequences(const serve::ApiError& e,
                     const std::vector<generation::GenerationRequest>& seqs, size_t expected,
                     const serve::ModelLimits& limits) {
  if (!e.ok()) return check_error(e);
  FUZZ_CHECK(seqs.size() == expected);
  for (const auto& s : seqs) {
    FUZZ_CHECK(!s.prompt.empty() && s.tokens_to_generate >= 0);
    FUZZ_CHECK((long)s.prompt.size() + s.tokens_to_generate <= limits.max_sequence);
    FUZZ_CHECK(s.sampling.temperature >= 0 && s.sampling.top_p > 0 && s.sampling.top_p <= 1);
  }
}

void megatron(std::string_view body, const serve::ModelLimits& limits) {
  serve::MegatronRequest r;
  serve::ApiError e = serve::parse_megatron_request(body, &r);
  if (!e.ok()) return check_error(e);
  FUZZ_CHECK(!r.prompts.empty() && r.prompts.size() <= serve::kMaxMegatronPrompts);
  FUZZ_CHECK(r.tokens_to_generate >= 0 && (r.tokens_to_generate > 0 || r.logprobs));
  FUZZ_CHECK(r.temperature > 0 && r.temperature <= 100);
  FUZZ_CHECK(r.top_k >= 0 && r.top_k <= 1000 && r.top_p >= 0 && r.top_p <= 1);
  FUZZ_CHECK(!(r.top_k > 0 && r.top_p > 0));
  std::vector<generation::GenerationRequest> seqs;
  e = serve::megatron_sequences(r, tok(), limits, 1, &seqs);
  check_sequences(e, seqs, r.prompts.size(), limits);
}

void completion(std::string_view body, const serve::ModelLimits& limits) {
  serve::CompletionRequest r;
  serve::ApiError e = serve::parse_completion_request(body, &r);
  if (!e.ok()) return check_error(e);
  FUZZ_CHECK(!r.prompts.empty() && r.n >= 1);
  FUZZ_CHECK(r.prompts.size() * (size_t)r.n <= serve::kMaxCompletionChoices);
  FUZZ_CHECK(r.max_tokens >= 0 && r.temperature >= 0 && r.temperature <= 2);
  FUZZ_CHECK(r.top_p >= 0 && r.top_p <= 1 && r.stop.size() <= serve::kMaxStopStrings);
  for (const std::string& s : r.stop) FUZZ_CHECK(!s.empty());
  if (r.logprobs) FUZZ_CHECK(*r.logprobs >= 0 && *r.logprobs <= 5);
  std::vector<generation::GenerationRequest> seqs;
  e = serve::completion_sequences(r, tok(), limits, 1, &seqs);
  check_sequences(e, seqs, r.prompts.size() * (size_t)r.n, limits);
}

// Messages come out as templates read them; the rendered text (here the contents joined, as
// a template would write them) becomes one sequence that fits the context.
void chat(std::string_view body, const serve::ModelLimits& limits) {
  serve::ChatRequest r;
  serve::ApiError e = serve::parse_chat_request(body, &r);
  if (!e.ok()) return check_error(e);
  FUZZ_CHECK(r.messages.is_array() && !r.messages.empty());
  std::string text;
  for (const auto& m : r.messages) {
    const std::string role = m.at("role").get<std::string>();
    FUZZ_CHECK(role == "system" || role == "user" || role == "assistant");
    text += role + ": " + m.at("content").get<std::string>() + "\n";
  }
  FUZZ_CHECK(r.options.temperature >= 0 && r.options.temperature <= 2);
  FUZZ_CHECK(r.options.stop.size() <= serve::kMaxStopStrings);
  if (r.max_tokens) FUZZ_CHECK(*r.max_tokens >= 0);
  if (r.top_logprobs) FUZZ_CHECK(*r.top_logprobs >= 0 && *r.top_logprobs <= 20);
  FUZZ_CHECK(!r.include_usage || r.options.stream);
  std::vector<generation::GenerationRequest> seqs(1);
  e = serve::chat_sequence(r, text, tok(), limits, 1, &seqs[0]);
  check_sequences(e, seqs, 1, limits);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const serve::ModelLimits limits{64};
  megatron(body, limits);
  completion(body, limits);
  chat(body, limits);
  return 0;
}
