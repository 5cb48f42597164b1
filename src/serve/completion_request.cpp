#include "serve/completion_request.h"

#include "serve/json_fields.h"

namespace trident::serve {

namespace {

// The legacy API's own fields that trident does not implement: accepted at their neutral
// value, refused otherwise (never silently ignored).
ApiError check_unsupported_completion_fields(const Json& j) {
  if (present(j, "echo") && j.at("echo") != false)
    return bad_request("echo", "echo is not supported by trident (only false)");
  if (present(j, "suffix")) return bad_request("suffix", "suffix is not supported by trident");
  if (present(j, "best_of") && j.at("best_of") != j.value("n", Json(1)))
    return bad_request("best_of", "best_of is not supported by trident (only equal to n)");
  return {};
}

ApiError read_prompt(const Json& j, CompletionRequest* r) {
  if (!present(j, "prompt")) return bad_request("prompt", "prompt is required");
  const Json& p = j.at("prompt");
  if (p.is_array() && !p.empty() && p[0].is_number_integer())
    return bad_request("prompt",
                       "prompt must be text (a string or a list of strings); token-id "
                       "prompts are not supported");
  return read_strings(j, "prompt", true, kMaxCompletionPrompts, &r->prompts);
}

ApiError read_options(const Json& j, CompletionRequest* r) {
  ApiError e;
  if (!(e = read_int(j, "max_tokens", 0, INT64_MAX, &r->max_tokens)).ok()) return e;
  if (!(e = read_int(j, "n", 1, kMaxCompletionChoices, &r->n)).ok()) return e;
  std::int64_t logprobs = -1;
  if (!(e = read_int(j, "logprobs", 0, 5, &logprobs)).ok()) return e;
  if (logprobs >= 0) r->logprobs = logprobs;
  return {};
}

}  // namespace

ApiError read_shared_fields(const Json& j, CompletionRequest* r) {
  ApiError e;
  if (!(e = read_string(j, "model", &r->model)).ok()) return e;
  if (!(e = read_number(j, "temperature", 0.0, false, 2.0, &r->temperature)).ok()) return e;
  if (!(e = read_number(j, "top_p", 0.0, false, 1.0, &r->top_p)).ok()) return e;
  if (present(j, "seed")) {
    std::int64_t seed = 0;
    if (!(e = read_int(j, "seed", INT64_MIN, INT64_MAX, &seed)).ok()) return e;
    r->seed = (std::uint64_t)seed;
  }
  if (!(e = read_bool(j, "stream", &r->stream)).ok()) return e;
  if (!(e = read_strings(j, "stop", true, kMaxStopStrings, &r->stop)).ok()) return e;
  for (const std::string& stop : r->stop)
    if (stop.empty()) return bad_request("stop", "stop strings must not be empty");
  // Accepted at their neutral value, refused otherwise (never silently ignored).
  for (const char* f : {"presence_penalty", "frequency_penalty"})
    if (present(j, f) && !(j.at(f).is_number() && j.at(f).get<double>() == 0.0))
      return bad_request(f, std::string(f) + " is not supported by trident (only 0)");
  if (present(j, "logit_bias") && !(j.at("logit_bias").is_object() && j.at("logit_bias").empty()))
    return bad_request("logit_bias", "logit_bias is not supported by trident (only {})");
  std::string user;
  return read_string(j, "user", &user);  // OpenAI's end-user id: type-checked, unused
}

ApiError parse_completion_request(std::string_view body, CompletionRequest* out) {
  Json j;
  CompletionRequest r;
  ApiError e;
  if (!(e = parse_json_object(body, &j)).ok()) return e;
  if (!(e = read_prompt(j, &r)).ok()) return e;
  if (!(e = read_shared_fields(j, &r)).ok()) return e;
  if (!(e = read_options(j, &r)).ok()) return e;
  if (r.prompts.size() * (size_t)r.n > kMaxCompletionChoices)
    return bad_request("n", std::to_string(r.prompts.size()) +
                                " prompts x n = " + std::to_string(r.n) + " asks for more than " +
                                std::to_string(kMaxCompletionChoices) + " completions");
  if (!(e = check_unsupported_completion_fields(j)).ok()) return e;
  *out = std::move(r);
  return {};
}

}  // namespace trident::serve
