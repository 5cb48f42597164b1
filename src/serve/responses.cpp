#include "serve/responses.h"

#include <nlohmann/json.hpp>

namespace trident::serve {

namespace {

using OJson = nlohmann::ordered_json;

// Decoded text may hold U+FFFD but never invalid UTF-8; replace anyway rather than throw.
std::string dump(const OJson& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string token_text(const tokenizer::Tokenizer& tok, int id) {
  return tok.decode({id});
}

using TopLogprobs = std::vector<std::pair<int, float>>;

// OpenAI's legacy logprobs object for generated tokens; top_logprobs (one {text: logprob}
// object per token, the request's `logprobs` likeliest) is null when it asked for 0.
OJson logprobs_object(const std::vector<int>& tokens, const std::vector<float>& logprobs,
                      const std::vector<TopLogprobs>& top, std::int64_t start_chars,
                      const tokenizer::Tokenizer& tok) {
  OJson strings = OJson::array(), values = OJson::array(), offsets = OJson::array();
  OJson tops = top.empty() ? OJson() : OJson::array();
  for (const TopLogprobs& t : top) {
    OJson entry = OJson::object();
    for (const auto& [id, lp] : t) entry[token_text(tok, id)] = lp;
    tops.push_back(entry);
  }
  std::int64_t chars = start_chars;
  for (size_t i = 0; i < tokens.size(); ++i) {
    strings.push_back(token_text(tok, tokens[i]));
    values.push_back(i < logprobs.size() ? OJson(logprobs[i]) : OJson());
    offsets.push_back(chars);
    chars += chars_started(tok.decode_bytes({tokens[i]}));
  }
  return {{"tokens", strings},
          {"token_logprobs", values},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

}  // namespace

std::int64_t chars_started(const std::string& bytes) {
  std::int64_t n = 0;
  for (unsigned char c : bytes) n += (c & 0xC0) != 0x80;
  return n;
}

std::string megatron_response(const std::vector<generation::GenerationResult>& results,
                              const tokenizer::Tokenizer& tok, bool logprobs) {
  OJson text = OJson::array(), segments = OJson::array(), lps = OJson::array(),
        tokens = OJson::array();
  for (const auto& r : results) {
    std::vector<int> all = r.prompt;
    all.insert(all.end(), r.tokens.begin(), r.tokens.end());
    text.push_back(tok.decode(r.prompt) + r.text);
    OJson seg = OJson::array();
    for (int id : all) seg.push_back(token_text(tok, id));
    segments.push_back(seg);
    std::vector<float> lp = r.prompt_logprobs;
    lp.insert(lp.end(), r.logprobs.begin(), r.logprobs.end());
    lps.push_back(lp);
    tokens.push_back(all);
  }
  return dump({{"text", text},
               {"segments", segments},
               {"logprobs", logprobs ? lps : OJson()},
               {"tokens", tokens}});
}

std::string openai_finish_reason(const std::string& reason) {
  if (reason == "eod") return "stop";
  return reason;  // "length", "stop", "cancelled"
}

std::string completion_response(const CompletionMeta& meta,
                                const std::vector<generation::GenerationResult>& results,
                                const tokenizer::Tokenizer& tok, int n) {
  OJson choices = OJson::array();
  std::int64_t prompt_tokens = 0, completion_tokens = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    if (i % n == 0) prompt_tokens += (std::int64_t)r.prompt.size();
    completion_tokens += (std::int64_t)r.tokens.size();
    OJson lp;
    if (meta.logprobs)
      lp = logprobs_object(r.tokens, r.logprobs, r.top_logprobs,
                           chars_started(tok.decode_bytes(r.prompt)), tok);
    choices.push_back({{"text", r.text},
                       {"index", i},
                       {"logprobs", lp},
                       {"finish_reason", openai_finish_reason(r.finish_reason)}});
  }
  return dump({{"id", meta.id},
               {"object", "text_completion"},
               {"created", meta.created},
               {"model", meta.model},
               {"choices", choices},
               {"usage",
                {{"prompt_tokens", prompt_tokens},
                 {"completion_tokens", completion_tokens},
                 {"total_tokens", prompt_tokens + completion_tokens}}}});
}

std::string completion_chunk(const CompletionMeta& meta, int index,
                             const generation::TokenEvent& event, const tokenizer::Tokenizer& tok,
                             StreamCursor* cursor) {
  OJson lp;
  if (meta.logprobs && event.token >= 0)
    lp = logprobs_object({event.token}, {event.logprob},
                         event.top_logprobs.empty() ? std::vector<TopLogprobs>{}
                                                    : std::vector<TopLogprobs>{event.top_logprobs},
                         cursor->chars, tok);
  if (event.token >= 0) cursor->chars += chars_started(tok.decode_bytes({event.token}));
  OJson choice = {{"text", event.text},
                  {"index", index},
                  {"logprobs", lp},
                  {"finish_reason",
                   event.finished ? OJson(openai_finish_reason(event.finish_reason)) : OJson()}};
  OJson chunk = {{"id", meta.id},
                 {"object", "text_completion"},
                 {"created", meta.created},
                 {"model", meta.model},
                 {"choices", OJson::array({choice})}};
  return "data: " + dump(chunk) + "\n\n";
}

std::string models_response(const std::string& model, std::int64_t created) {
  OJson entry = {{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "trident"}};
  return dump({{"object", "list"}, {"data", OJson::array({entry})}});
}

}  // namespace trident::serve
