#include "serve/megatron_request.h"

#include "serve/json_fields.h"

namespace trident::serve {

namespace {

// Fields Megatron renamed: it answers these with a hint, and so do we.
ApiError check_renamed(const Json& j) {
  if (j.contains("max_len"))
    return bad_request("max_len", "max_len is no longer used; replace it with tokens_to_generate");
  if (j.contains("sentences"))
    return bad_request("sentences", "sentences is no longer used; replace it with prompts");
  return {};
}

// Megatron options trident does not implement: accepted at their default (so clients that
// always send them work), refused otherwise rather than silently ignored.
ApiError check_unsupported_megatron_fields(const Json& j) {
  const char* zero_fields[] = {"top_p_decay", "top_p_bound"};
  for (const char* f : zero_fields)
    if (present(j, f) && !(j.at(f).is_number() && j.at(f).get<double>() == 0.0))
      return bad_request(f, std::string(f) + " is not supported by trident (only 0)");
  const char* false_fields[] = {"stop_on_double_eol", "prevent_newline_after_colon"};
  for (const char* f : false_fields)
    if (present(j, f) && j.at(f) != false)
      return bad_request(f, std::string(f) + " is not supported by trident (only false)");
  if (present(j, "beam_width"))
    return bad_request("beam_width", "beam_width (beam search) is not supported by trident");
  bool no_log = false;
  return read_bool(j, "no_log", &no_log);  // trident never logs bodies; just type-checked
}

ApiError read_sampling(const Json& j, MegatronRequest* r) {
  ApiError e;
  if (!(e = read_number(j, "temperature", 0.0, true, 100.0, &r->temperature)).ok()) return e;
  if (!(e = read_int(j, "top_k", 0, 1000, &r->top_k)).ok()) return e;
  if (!(e = read_number(j, "top_p", 0.0, false, 1.0, &r->top_p)).ok()) return e;
  if (r->top_p > 0.0 && r->top_k > 0)
    return bad_request("top_p", "cannot set both top_k and top_p sampling (top_k " +
                                    std::to_string(r->top_k) + ", top_p > 0)");
  return read_int(j, "random_seed", 0, INT64_MAX, &r->random_seed);
}

ApiError read_prompts(const Json& j, MegatronRequest* r) {
  if (!present(j, "prompts")) return bad_request("prompts", "prompts is required");
  return read_strings(j, "prompts", false, kMaxMegatronPrompts, &r->prompts);
}

}  // namespace

ApiError parse_megatron_request(std::string_view body, MegatronRequest* out) {
  Json j;
  MegatronRequest r;
  ApiError e;
  if (!(e = parse_json_object(body, &j)).ok()) return e;
  if (!(e = check_renamed(j)).ok()) return e;
  if (!(e = read_prompts(j, &r)).ok()) return e;
  if (!(e = read_int(j, "tokens_to_generate", 0, INT64_MAX, &r.tokens_to_generate)).ok()) return e;
  if (!(e = read_bool(j, "logprobs", &r.logprobs)).ok()) return e;
  if (r.tokens_to_generate == 0 && !r.logprobs)
    return bad_request("tokens_to_generate",
                       "tokens_to_generate=0 implies logprobs should be true (nothing to return)");
  if (!(e = read_sampling(j, &r)).ok()) return e;
  if (!(e = read_bool(j, "add_BOS", &r.add_BOS)).ok()) return e;
  if (!(e = read_bool(j, "stop_on_eol", &r.stop_on_eol)).ok()) return e;
  for (size_t i = 0; i < r.prompts.size(); ++i)
    if (r.prompts[i].empty() && !r.add_BOS)
      return bad_request("prompts[" + std::to_string(i) + "]",
                         "prompts[" + std::to_string(i) +
                             "] is empty; empty prompts require "
                             "add_BOS=true");
  if (!(e = check_unsupported_megatron_fields(j)).ok()) return e;
  *out = std::move(r);
  return {};
}

}  // namespace trident::serve
