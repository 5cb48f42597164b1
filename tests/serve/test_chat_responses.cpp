// The chat completions answers from a Generator result, without a model: the whole object,
// and a stream's chunks (role first, content deltas with their logprobs, the finish, usage).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serve/chat_responses.h"
#include "serve/serve_test_util.h"
#include "tokenizer/gpt2_tokenizer.h"

namespace trident::serve {
namespace {

using generation::GenerationResult;
using generation::TokenEvent;
using nlohmann::json;

class ServeChatResponses : public Gpt2TokenizerSuite {};

// The events of one SSE string, parsed.
std::vector<json> events(const std::string& sse) {
  std::vector<json> out;
  size_t at = 0;
  while (at < sse.size()) {
    const size_t end = sse.find("\n\n", at);
    EXPECT_EQ(sse.substr(at, 6), "data: ");
    out.push_back(json::parse(sse.substr(at + 6, end - at - 6)));
    at = end + 2;
  }
  return out;
}

TEST_F(ServeChatResponses, WholeAnswer) {
  GenerationResult r;
  r.prompt = {15496, 11, 1312};
  r.tokens = {995, 0};  // " world" "!"
  r.logprobs = {-1.5f, -0.25f};
  r.top_logprobs = {{{995, -1.5f}, {11, -2.f}}, {{0, -0.25f}, {13, -3.f}}};
  r.text = " world!";
  r.finish_reason = "eod";
  CompletionMeta meta{"chatcmpl-1", 1700000000, "tiny", true};
  json j = json::parse(chat_response(meta, r, *tok_));
  EXPECT_EQ(j["id"], "chatcmpl-1");
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["message"], json({{"role", "assistant"}, {"content", " world!"}}));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");  // the end of text is a stop
  const json& lp = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 2u);
  EXPECT_EQ(lp[0]["token"], " world");
  EXPECT_EQ(lp[0]["logprob"], -1.5);
  EXPECT_EQ(lp[0]["bytes"], json({32, 119, 111, 114, 108, 100}));
  EXPECT_EQ(lp[0]["top_logprobs"][1], json({{"token", ","}, {"logprob", -2.0}, {"bytes", {44}}}));
  EXPECT_EQ(lp[1]["top_logprobs"][0]["token"], "!");
  EXPECT_EQ(j["usage"],
            json({{"prompt_tokens", 3}, {"completion_tokens", 2}, {"total_tokens", 5}}));
  meta.logprobs = false;
  r.finish_reason = "length";
  j = json::parse(chat_response(meta, r, *tok_));
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
}

TEST_F(ServeChatResponses, StreamChunks) {
  CompletionMeta meta{"chatcmpl-2", 5, "tiny", true};
  ChatStream st;
  st.include_usage = true;
  st.prompt_tokens = 3;
  TokenEvent e;
  e.token = 995;
  e.logprob = -1.5f;
  e.text = " world";
  std::vector<json> first = events(chat_chunks(meta, e, *tok_, &st));
  ASSERT_EQ(first.size(), 2u);  // the role, then the content
  EXPECT_EQ(first[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(first[0]["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(first[0]["usage"].is_null());
  EXPECT_TRUE(first[0].contains("usage"));
  EXPECT_EQ(first[1]["choices"][0]["delta"], json({{"content", " world"}}));
  EXPECT_EQ(first[1]["choices"][0]["logprobs"]["content"][0]["token"], " world");
  EXPECT_TRUE(first[1]["choices"][0]["finish_reason"].is_null());
  // The last event holds back text (a stop string's prefix that was not one) and the finish.
  TokenEvent last;
  last.finished = true;
  last.finish_reason = "stop";
  last.text = "!";
  std::vector<json> end = events(chat_chunks(meta, last, *tok_, &st));
  ASSERT_EQ(end.size(), 2u);
  EXPECT_EQ(end[0]["choices"][0]["delta"], json({{"content", "!"}}));
  EXPECT_TRUE(end[0]["choices"][0]["logprobs"].is_null());  // no token came with it
  EXPECT_EQ(end[1]["choices"][0]["delta"], json::object());
  EXPECT_EQ(end[1]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(st.completion_tokens, 1);
  std::vector<json> usage = events(chat_usage_chunk(meta, st));
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0]["choices"], json::array());
  EXPECT_EQ(usage[0]["usage"],
            json({{"prompt_tokens", 3}, {"completion_tokens", 1}, {"total_tokens", 4}}));
  st = ChatStream{};
  std::vector<json> plain = events(chat_chunks(meta, e, *tok_, &st));
  EXPECT_FALSE(plain[0].contains("usage"));  // only a stream that asked for usage says null
}

}  // namespace
}  // namespace trident::serve
