#include "serve/chat_request.h"

#include <algorithm>

namespace trident::serve {

namespace {

using OJson = nlohmann::ordered_json;

// A content part list's texts joined by "\n" (vLLM's choice for text-only models); parts of
// another type (images, audio) are refused naming the part.
ApiError join_text_parts(const Json& parts, const std::string& field, std::string* out) {
  if (parts.empty()) return bad_request(field, field + " must not be an empty list");
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string part = field + "[" + std::to_string(i) + "]";
    const Json& p = parts[i];
    if (!p.is_object()) return bad_request(part, part + " must be an object, got " + describe(p));
    if (!p.contains("type") || p["type"] != "text")
      return bad_request(part + ".type",
                         part + ".type must be \"text\" (trident serves text only), got " +
                             (p.contains("type") ? describe(p["type"]) : "none"));
    if (!p.contains("text") || !p["text"].is_string())
      return bad_request(part + ".text", part + ".text must be a string, got " +
                                             (p.contains("text") ? describe(p["text"]) : "none"));
    if (i > 0) text += "\n";
    text += p["text"].get<std::string>();
  }
  *out = std::move(text);
  return {};
}

ApiError read_role(const Json& m, const std::string& field, std::string* role) {
  if (!m.contains("role") || m["role"].is_null())
    return bad_request(field + ".role", field + ".role is required");
  const Json& r = m["role"];
  const std::string rule = field +
                           ".role must be \"system\", \"developer\", \"user\" or \"assistant\" "
                           "(tool and function messages are not supported), got ";
  if (!r.is_string()) return bad_request(field + ".role", rule + describe(r));
  *role = r.get<std::string>();
  if (*role == "developer") *role = "system";  // OpenAI's newer name for the system prompt
  if (*role != "system" && *role != "user" && *role != "assistant")
    return bad_request(field + ".role", rule + "\"" + r.get<std::string>() + "\"");
  return {};
}

ApiError read_content(const Json& m, const std::string& field, std::string* content) {
  if (m.contains("tool_calls") && !m["tool_calls"].is_null())
    return bad_request(field + ".tool_calls", "tool calls are not supported by trident");
  const std::string name = field + ".content";
  if (!m.contains("content") || m["content"].is_null())
    return bad_request(name, name + " is required");
  const Json& c = m["content"];
  if (c.is_string()) {
    *content = c.get<std::string>();
    return {};
  }
  if (c.is_array()) return join_text_parts(c, name, content);
  return bad_request(name, name + " must be a string or a list of text parts, got " + describe(c));
}

ApiError read_message(const Json& m, size_t i, OJson* out) {
  const std::string field = "messages[" + std::to_string(i) + "]";
  if (!m.is_object()) return bad_request(field, field + " must be an object, got " + describe(m));
  std::string role, content, name;
  ApiError e;
  if (!(e = read_role(m, field, &role)).ok()) return e;
  if (!(e = read_content(m, field, &content)).ok()) return e;
  OJson message = {{"role", role}, {"content", content}};
  if (present(m, "name")) {  // a participant's name, for templates that show it
    if (!(e = read_string(m, "name", &name)).ok())
      return bad_request(field + ".name",
                         field + ".name must be a string, got " + describe(m["name"]));
    message["name"] = name;
  }
  *out = std::move(message);
  return {};
}

ApiError read_messages(const Json& j, ChatRequest* r) {
  if (!present(j, "messages")) return bad_request("messages", "messages is required");
  const Json& ms = j.at("messages");
  if (!ms.is_array())
    return bad_request(
        "messages",
        "messages must be a list of {\"role\", \"content\"} objects, got " + describe(ms));
  if (ms.empty()) return bad_request("messages", "messages must not be an empty list");
  r->messages = OJson::array();
  for (size_t i = 0; i < ms.size(); ++i) {
    OJson message;
    ApiError e = read_message(ms[i], i, &message);
    if (!e.ok()) return e;
    r->messages.push_back(std::move(message));
  }
  return {};
}

// max_completion_tokens (OpenAI's current name) wins over max_tokens (deprecated, same meaning).
ApiError read_lengths(const Json& j, ChatRequest* r) {
  for (const char* f : {"max_tokens", "max_completion_tokens"}) {
    std::int64_t n = -1;
    ApiError e = read_int(j, f, 0, INT64_MAX, &n);
    if (!e.ok()) return e;
    if (n >= 0) r->max_tokens = n, r->max_tokens_field = f;
  }
  return {};
}

ApiError read_logprobs(const Json& j, ChatRequest* r) {
  bool logprobs = false;
  std::int64_t top = -1;
  ApiError e;
  if (!(e = read_bool(j, "logprobs", &logprobs)).ok()) return e;
  if (!(e = read_int(j, "top_logprobs", 0, kMaxChatTopLogprobs, &top)).ok()) return e;
  if (top >= 0 && !logprobs)
    return bad_request("top_logprobs", "top_logprobs needs \"logprobs\": true");
  if (logprobs) r->top_logprobs = std::max<std::int64_t>(top, 0);
  return {};
}

ApiError read_stream_options(const Json& j, ChatRequest* r) {
  if (!present(j, "stream_options")) return {};
  const Json& o = j.at("stream_options");
  if (!r->options.stream)
    return bad_request("stream_options", "stream_options is only allowed with \"stream\": true");
  if (!o.is_object())
    return bad_request("stream_options", "stream_options must be an object, got " + describe(o));
  if (present(o, "include_usage") && !o.at("include_usage").is_boolean())
    return bad_request("stream_options.include_usage",
                       "stream_options.include_usage must be true or false, got " +
                           describe(o.at("include_usage")));
  r->include_usage = present(o, "include_usage") && o.at("include_usage").get<bool>();
  return {};
}

// Chat fields trident does not implement: accepted at their neutral value, refused otherwise.
ApiError check_unsupported_chat_fields(const Json& j) {
  if (present(j, "n") && j.at("n") != 1)
    return bad_request("n", "n must be 1 (trident answers one choice per chat request), got " +
                                describe(j.at("n")));
  for (const char* f : {"tools", "functions"})
    if (present(j, f) && !(j.at(f).is_array() && j.at(f).empty()))
      return bad_request(f, std::string(f) + " are not supported by trident (no tool calling)");
  for (const char* f : {"tool_choice", "function_call"})
    if (present(j, f) && j.at(f) != "none")
      return bad_request(f, std::string(f) + " is not supported by trident (only \"none\")");
  if (present(j, "response_format") && j.at("response_format") != Json{{"type", "text"}})
    return bad_request("response_format",
                       "response_format is not supported by trident (only {\"type\": \"text\"})");
  return {};
}

}  // namespace

ApiError parse_chat_request(std::string_view body, ChatRequest* out) {
  Json j;
  ChatRequest r;
  ApiError e;
  if (!(e = parse_json_object(body, &j)).ok()) return e;
  if (!(e = read_messages(j, &r)).ok()) return e;
  if (!(e = read_shared_fields(j, &r.options)).ok()) return e;
  if (!(e = read_lengths(j, &r)).ok()) return e;
  if (!(e = read_logprobs(j, &r)).ok()) return e;
  if (!(e = read_stream_options(j, &r)).ok()) return e;
  if (!(e = check_unsupported_chat_fields(j)).ok()) return e;
  *out = std::move(r);
  return {};
}

}  // namespace trident::serve
