// The chat completions body, without a model: messages come out as templates read them
// (content parts joined, "developer" as "system"), OpenAI's fields and defaults, every bad
// message or field a 400 naming it; then the one sequence of a rendered conversation.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve/chat_request.h"
#include "serve/sequences.h"
#include "serve/serve_test_util.h"
#include "tokenizer/gpt2_tokenizer.h"

namespace trident::serve {
namespace {

using OJson = nlohmann::ordered_json;

TEST(ServeChatRequest, Defaults) {
  ChatRequest r;
  ApiError e = parse_chat_request(R"({"messages": [{"role": "user", "content": "Hi"}]})", &r);
  ASSERT_TRUE(e.ok()) << e.message;
  EXPECT_EQ(r.messages, OJson::parse(R"([{"role": "user", "content": "Hi"}])"));
  EXPECT_FALSE(r.max_tokens.has_value());  // up to the context
  EXPECT_FALSE(r.top_logprobs.has_value());
  EXPECT_FALSE(r.include_usage);
  EXPECT_EQ(r.options.temperature, 1.0);
  EXPECT_EQ(r.options.top_p, 1.0);
  EXPECT_FALSE(r.options.stream);
  EXPECT_FALSE(r.options.seed.has_value());
}

TEST(ServeChatRequest, AllFields) {
  ChatRequest r;
  ApiError e = parse_chat_request(
      R"({"messages": [{"role": "developer", "content": "Be brief."},
                       {"role": "user", "content": [{"type": "text", "text": "a"},
                                                    {"type": "text", "text": "b"}], "name": "ann"},
                       {"role": "assistant", "content": "ok"}],
          "model": "m", "max_tokens": 7, "max_completion_tokens": 5, "temperature": 0,
          "top_p": 0.5, "seed": 3, "stop": ["x", "y"], "stream": true,
          "stream_options": {"include_usage": true}, "logprobs": true, "top_logprobs": 20,
          "n": 1, "presence_penalty": 0, "logit_bias": {}, "user": "u", "tools": [],
          "tool_choice": "none", "response_format": {"type": "text"}})",
      &r);
  ASSERT_TRUE(e.ok()) << e.message;
  EXPECT_EQ(r.messages, OJson::parse(R"([{"role": "system", "content": "Be brief."},
                                          {"role": "user", "content": "a\nb", "name": "ann"},
                                          {"role": "assistant", "content": "ok"}])"));
  EXPECT_EQ(r.max_tokens, 5);  // max_completion_tokens wins over the older max_tokens
  EXPECT_EQ(r.max_tokens_field, "max_completion_tokens");
  EXPECT_EQ(r.top_logprobs, 20);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.options.model, "m");
  EXPECT_EQ(r.options.stop, (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(r.options.seed, 3u);
  EXPECT_TRUE(r.options.stream);
  ASSERT_TRUE(parse_chat_request(R"({"messages": [{"role": "user", "content": ""}],
                                     "logprobs": true, "max_tokens": 0})",
                                 &r)
                  .ok());
  EXPECT_EQ(r.top_logprobs, 0);
  EXPECT_EQ(r.max_tokens, 0);
  EXPECT_EQ(r.max_tokens_field, "max_tokens");
}

struct BadCase {
  std::string body;
  std::string param;
  std::string message;
};

TEST(ServeChatRequest, BadMessagesAndFields) {
  const std::string ok = R"("messages": [{"role": "user", "content": "Hi"}])";
  const std::vector<BadCase> cases = {
      {"[]", "", "must be a JSON object, got a list"},
      {"{}", "messages", "messages is required"},
      {R"({"messages": "Hi"})", "messages", "must be a list of {\"role\", \"content\"} objects"},
      {R"({"messages": []})", "messages", "messages must not be an empty list"},
      {R"({"messages": [3]})", "messages[0]", "messages[0] must be an object, got the integer 3"},
      {R"({"messages": [{"content": "Hi"}]})", "messages[0].role", "messages[0].role is required"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}]})",
       "messages[1].role", "got \"tool\""},
      {R"({"messages": [{"role": 1, "content": "a"}]})", "messages[0].role", "got the integer 1"},
      {R"({"messages": [{"role": "user"}]})", "messages[0].content", "content is required"},
      {R"({"messages": [{"role": "assistant", "content": null}]})", "messages[0].content",
       "content is required"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content",
       "must be a string or a list of text parts, got the integer 5"},
      {R"({"messages": [{"role": "user", "content": []}]})", "messages[0].content",
       "must not be an empty list"},
      {R"({"messages": [{"role": "user", "content": ["a"]}]})", "messages[0].content[0]",
       "must be an object, got a string"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})",
       "messages[0].content[0].type", "must be \"text\""},
      {R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})",
       "messages[0].content[0].text", "must be a string, got none"},
      {R"({"messages": [{"role": "user", "content": "a", "name": 2}]})", "messages[0].name",
       "must be a string"},
      {R"({"messages": [{"role": "assistant", "content": "", "tool_calls": []}]})",
       "messages[0].tool_calls", "not supported"},
      {"{" + ok + R"(, "n": 2})", "n", "n must be 1"},
      {"{" + ok + R"(, "max_tokens": -1})", "max_tokens", "an integer >= 0"},
      {"{" + ok + R"(, "max_completion_tokens": "5"})", "max_completion_tokens", "got a string"},
      {"{" + ok + R"(, "temperature": 3})", "temperature", "in [0, 2]"},
      {"{" + ok + R"(, "stop": ["a", "b", "c", "d", "e"]})", "stop", "at most 4"},
      {"{" + ok + R"(, "logprobs": 2})", "logprobs", "true or false"},
      {"{" + ok + R"(, "top_logprobs": 2})", "top_logprobs", "needs \"logprobs\": true"},
      {"{" + ok + R"(, "logprobs": true, "top_logprobs": 21})", "top_logprobs", "[0, 20]"},
      {"{" + ok + R"(, "stream_options": {"include_usage": true}})", "stream_options",
       "only allowed with \"stream\": true"},
      {"{" + ok + R"(, "stream": true, "stream_options": {"include_usage": 1}})",
       "stream_options.include_usage", "true or false"},
      {"{" + ok + R"(, "tools": [{"type": "function"}]})", "tools", "not supported"},
      {"{" + ok + R"(, "tool_choice": "auto"})", "tool_choice", "not supported"},
      {"{" + ok + R"(, "response_format": {"type": "json_object"}})", "response_format",
       "not supported"},
      {"{" + ok + R"(, "frequency_penalty": 0.5})", "frequency_penalty", "not supported"},
  };
  for (const BadCase& c : cases) {
    ChatRequest r;
    ApiError e = parse_chat_request(c.body, &r);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(e.message.find(c.message), std::string::npos)
        << c.body << "\n  message: " << e.message << "\n  expected a part: " << c.message;
  }
}

class ServeChatSequence : public Gpt2TokenizerSuite {
 protected:
  ModelLimits limits_{32};
};

TEST_F(ServeChatSequence, RenderedTextIsThePrompt) {
  ChatRequest r;
  ASSERT_TRUE(parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
                                     "temperature": 0, "stop": "\n", "seed": 9,
                                     "logprobs": true, "top_logprobs": 3})",
                                 &r)
                  .ok());
  generation::GenerationRequest g;
  ASSERT_TRUE(chat_sequence(r, "Hello world", *tok_, limits_, 55, &g).ok());
  EXPECT_EQ(g.prompt, (std::vector<int>{15496, 995}));  // no BOS: templates write their own
  EXPECT_EQ(g.tokens_to_generate, 30);                  // no max_tokens: the rest of the context
  EXPECT_TRUE(g.sampling.is_greedy());
  EXPECT_EQ(g.sampling.seed, 9u);
  EXPECT_EQ(g.stop, std::vector<std::string>{"\n"});
  EXPECT_TRUE(g.logprobs);
  EXPECT_EQ(g.top_logprobs, 3);
  ASSERT_TRUE(parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
                                     "max_tokens": 4})",
                                 &r)
                  .ok());
  ASSERT_TRUE(chat_sequence(r, "Hello world", *tok_, limits_, 55, &g).ok());
  EXPECT_EQ(g.tokens_to_generate, 4);
  EXPECT_EQ(g.sampling.seed, 55u);  // the server's fresh seed
  EXPECT_FALSE(g.logprobs);
}

TEST_F(ServeChatSequence, ContextIsChecked) {
  ChatRequest r;
  ASSERT_TRUE(parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}],
                                     "max_completion_tokens": 31})",
                                 &r)
                  .ok());
  generation::GenerationRequest g;
  ApiError e = chat_sequence(r, "Hello world", *tok_, limits_, 1, &g);
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(e.param, "max_completion_tokens");
  EXPECT_EQ(e.message,
            "messages is 2 tokens; with max_completion_tokens = 31 that exceeds the context of "
            "32 tokens (--max-sequence-length)");
  // Without a length, a conversation that fills the context leaves no room for a reply.
  ASSERT_TRUE(parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}]})", &r).ok());
  std::string long_text;
  for (int i = 0; i < 32; ++i) long_text += " a";
  e = chat_sequence(r, long_text, *tok_, limits_, 1, &g);
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_NE(e.message.find("messages is 32 tokens"), std::string::npos) << e.message;
}

}  // namespace
}  // namespace trident::serve
