#include "serve/chat_responses.h"

#include <nlohmann/json.hpp>

namespace trident::serve {

namespace {

using OJson = nlohmann::ordered_json;

std::string dump(const OJson& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A token as OpenAI's chat logprobs list it: its text, and its bytes (a token may hold part
// of a character, whose text alone cannot say).
OJson token_entry(const tokenizer::Tokenizer& tok, int id, float logprob) {
  const std::string bytes = tok.decode_bytes({id});
  OJson b = OJson::array();
  for (unsigned char c : bytes) b.push_back((int)c);
  return {{"token", tok.decode({id})}, {"logprob", logprob}, {"bytes", b}};
}

OJson logprob_entry(const tokenizer::Tokenizer& tok, int id, float logprob,
                    const std::vector<std::pair<int, float>>& top) {
  OJson entry = token_entry(tok, id, logprob);
  OJson likeliest = OJson::array();
  for (const auto& [other, lp] : top) likeliest.push_back(token_entry(tok, other, lp));
  entry["top_logprobs"] = likeliest;
  return entry;
}

OJson usage(std::int64_t prompt, std::int64_t completion) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

std::string chunk(const CompletionMeta& meta, const ChatStream& st, OJson choices) {
  OJson c = {{"id", meta.id},
             {"object", "chat.completion.chunk"},
             {"created", meta.created},
             {"model", meta.model},
             {"choices", std::move(choices)}};
  if (st.include_usage) c["usage"] = nullptr;
  return "data: " + dump(c) + "\n\n";
}

OJson choice(OJson delta, OJson logprobs, OJson finish_reason) {
  return OJson::array({{{"index", 0},
                        {"delta", std::move(delta)},
                        {"logprobs", std::move(logprobs)},
                        {"finish_reason", std::move(finish_reason)}}});
}

}  // namespace

std::string chat_response(const CompletionMeta& meta, const generation::GenerationResult& r,
                          const tokenizer::Tokenizer& tok) {
  OJson logprobs;
  if (meta.logprobs) {
    OJson content = OJson::array();
    for (size_t i = 0; i < r.tokens.size(); ++i)
      content.push_back(logprob_entry(
          tok, r.tokens[i], i < r.logprobs.size() ? r.logprobs[i] : NAN,
          i < r.top_logprobs.size() ? r.top_logprobs[i] : std::vector<std::pair<int, float>>{}));
    logprobs = {{"content", content}};
  }
  OJson message = {{"role", "assistant"}, {"content", r.text}};
  OJson choice = {{"index", 0},
                  {"message", message},
                  {"logprobs", logprobs},
                  {"finish_reason", openai_finish_reason(r.finish_reason)}};
  return dump({{"id", meta.id},
               {"object", "chat.completion"},
               {"created", meta.created},
               {"model", meta.model},
               {"choices", OJson::array({choice})},
               {"usage", usage((std::int64_t)r.prompt.size(), (std::int64_t)r.tokens.size())}});
}

std::string chat_chunks(const CompletionMeta& meta, const generation::TokenEvent& event,
                        const tokenizer::Tokenizer& tok, ChatStream* st) {
  std::string out;
  if (!st->role_sent) {
    out += chunk(meta, *st, choice({{"role", "assistant"}, {"content", ""}}, nullptr, nullptr));
    st->role_sent = true;
  }
  if (event.token >= 0 || !event.text.empty()) {
    OJson logprobs;
    if (meta.logprobs && event.token >= 0)
      logprobs = {{"content", OJson::array({logprob_entry(tok, event.token, event.logprob,
                                                          event.top_logprobs)})}};
    out += chunk(meta, *st, choice({{"content", event.text}}, logprobs, nullptr));
  }
  if (event.token >= 0) ++st->completion_tokens;
  if (event.finished)
    out += chunk(meta, *st,
                 choice(OJson::object(), nullptr, openai_finish_reason(event.finish_reason)));
  return out;
}

std::string chat_usage_chunk(const CompletionMeta& meta, const ChatStream& st) {
  OJson c = {{"id", meta.id},
             {"object", "chat.completion.chunk"},
             {"created", meta.created},
             {"model", meta.model},
             {"choices", OJson::array()},
             {"usage", usage(st.prompt_tokens, st.completion_tokens)}};
  return "data: " + dump(c) + "\n\n";
}

}  // namespace trident::serve
