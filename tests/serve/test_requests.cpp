// `trident serve`'s request parsers and checks, without a model: every kind of bad request
// gets a 4xx with a message naming the field and the rule; good requests get Megatron's and
// OpenAI's defaults.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "serve/completion_request.h"
#include "serve/megatron_request.h"
#include "serve/sequences.h"
#include "serve/serve_test_util.h"
#include "tokenizer/gpt2_tokenizer.h"

namespace trident::serve {
namespace {

struct BadCase {
  std::string body;
  std::string param;    // the field the error names
  std::string message;  // a part of the message
};

template <typename Request, typename Parse>
void expect_all_rejected(const std::vector<BadCase>& cases, Parse parse) {
  for (const BadCase& c : cases) {
    Request r;
    ApiError e = parse(c.body, &r);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(e.message.find(c.message), std::string::npos)
        << c.body << "\n  message: " << e.message << "\n  expected a part: " << c.message;
    EXPECT_EQ(e.type, "invalid_request_error");
  }
}

const std::vector<BadCase> kBodyCases = {
    {"", "", "not valid JSON (it is empty)"},
    {"{\"prompts\": [\"a\"]", "", "not valid JSON: parse error at line 1, column 18: syntax error"},
    {"[\"a\"]", "", "must be a JSON object, got a list"},
    {"\"text\"", "", "must be a JSON object, got a string"},
    {"{\"prompts\": [\"\xff\"]}", "", "not valid UTF-8 (byte 14)"},
    {"{\"prompts\": [\"\xed\xa0\x80\"]}", "", "not valid UTF-8"},  // a surrogate
    {"{\"prompts\": [\"\\ud800\"]}", "", "not valid JSON"},        // escaped lone surrogate
};

TEST(ServeMegatronRequest, Defaults) {
  MegatronRequest r;
  ASSERT_TRUE(parse_megatron_request(R"({"prompts": ["Hello", "World"]})", &r).ok());
  EXPECT_EQ(r.prompts, (std::vector<std::string>{"Hello", "World"}));
  EXPECT_EQ(r.tokens_to_generate, 64);
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.temperature, 1.0);
  EXPECT_EQ(r.top_k, 0);
  EXPECT_EQ(r.top_p, 0.0);
  EXPECT_FALSE(r.add_BOS);
  EXPECT_EQ(r.random_seed, -1);
}

TEST(ServeMegatronRequest, AllFields) {
  MegatronRequest r;
  ApiError e = parse_megatron_request(
      R"({"prompts": [""], "tokens_to_generate": 0, "logprobs": true, "temperature": 0.5,
          "top_p": 0.9, "add_BOS": true, "stop_on_eol": true, "random_seed": 7,
          "top_p_decay": 0.0, "stop_on_double_eol": false, "no_log": true})",
      &r);
  ASSERT_TRUE(e.ok()) << e.message;
  EXPECT_EQ(r.tokens_to_generate, 0);
  EXPECT_TRUE(r.logprobs && r.add_BOS && r.stop_on_eol);
  EXPECT_EQ(r.temperature, 0.5);
  EXPECT_FLOAT_EQ(r.top_p, 0.9);
  EXPECT_EQ(r.random_seed, 7);
}

TEST(ServeMegatronRequest, BadBodies) {
  expect_all_rejected<MegatronRequest>(kBodyCases, parse_megatron_request);
}

TEST(ServeMegatronRequest, BadFields) {
  std::string many = "{\"prompts\": [";
  for (int i = 0; i < 129; ++i) many += std::string(i ? "," : "") + "\"x\"";
  many += "]}";
  expect_all_rejected<MegatronRequest>(
      {
          {"{}", "prompts", "prompts is required"},
          {R"({"prompts": null})", "prompts", "prompts is required"},
          {R"({"prompts": "a"})", "prompts", "prompts must be a list of strings, got a string"},
          {R"({"prompts": []})", "prompts", "prompts must not be an empty list"},
          {R"({"prompts": ["a", 3]})", "prompts[1]",
           "prompts[1] must be a string, got the "
           "integer 3"},
          {many, "prompts", "129 entries, at most 128"},
          {R"({"prompts": ["a"], "max_len": 3})", "max_len", "replace it with tokens_to_generate"},
          {R"({"sentences": ["a"]})", "sentences", "replace it with prompts"},
          {R"({"prompts": ["a"], "tokens_to_generate": -1})", "tokens_to_generate",
           "tokens_to_generate must be an integer >= 0, got the integer -1"},
          {R"({"prompts": ["a"], "tokens_to_generate": 2.5})", "tokens_to_generate",
           "got the number 2.5"},
          {R"({"prompts": ["a"], "tokens_to_generate": "8"})", "tokens_to_generate",
           "got a string"},
          {R"({"prompts": ["a"], "tokens_to_generate": 0})", "tokens_to_generate",
           "tokens_to_generate=0 implies logprobs should be true"},
          {R"({"prompts": ["a"], "logprobs": 1})", "logprobs", "logprobs must be true or false"},
          {R"({"prompts": ["a"], "temperature": 0})", "temperature",
           "temperature must be a number in (0, 100], got the integer 0"},
          {R"({"prompts": ["a"], "temperature": 100.5})", "temperature", "in (0, 100]"},
          {R"({"prompts": ["a"], "temperature": 1e999})", "",
           "not valid JSON: number overflow parsing '1e999'"},
          {R"({"prompts": ["a"], "temperature": "hot"})", "temperature", "got a string"},
          {R"({"prompts": ["a"], "top_k": 1001})", "top_k",
           "top_k must be an integer in [0, 1000]"},
          {R"({"prompts": ["a"], "top_k": -1})", "top_k", "[0, 1000]"},
          {R"({"prompts": ["a"], "top_p": 1.5})", "top_p", "top_p must be a number in [0, 1]"},
          {R"({"prompts": ["a"], "top_k": 5, "top_p": 0.5})", "top_p",
           "cannot set both top_k and top_p"},
          {R"({"prompts": ["a"], "random_seed": -2})", "random_seed", "an integer >= 0"},
          {R"({"prompts": ["a"], "random_seed": 18446744073709551615})", "random_seed",
           "(at most 9223372036854775807), got the integer 18446744073709551615"},
          {R"({"prompts": ["a"], "add_BOS": "yes"})", "add_BOS", "add_BOS must be true or false"},
          {R"({"prompts": ["a", ""]})", "prompts[1]", "empty prompts require add_BOS=true"},
          {R"({"prompts": ["a"], "stop_on_eol": 0})", "stop_on_eol", "must be true or false"},
          {R"({"prompts": ["a"], "beam_width": 2})", "beam_width", "not supported"},
          {R"({"prompts": ["a"], "stop_on_double_eol": true})", "stop_on_double_eol",
           "not supported"},
          {R"({"prompts": ["a"], "top_p_bound": 0.5})", "top_p_bound", "not supported"},
      },
      parse_megatron_request);
}

TEST(ServeCompletionRequest, Defaults) {
  CompletionRequest r;
  ASSERT_TRUE(parse_completion_request(R"({"prompt": "Hello", "model": "m"})", &r).ok());
  EXPECT_EQ(r.prompts, std::vector<std::string>{"Hello"});
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_EQ(r.temperature, 1.0);
  EXPECT_EQ(r.top_p, 1.0);
  EXPECT_EQ(r.n, 1);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.logprobs.has_value());
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_FALSE(r.stream);
}

TEST(ServeCompletionRequest, AllFields) {
  CompletionRequest r;
  ApiError e = parse_completion_request(
      R"({"prompt": ["a", "b"], "max_tokens": 0, "temperature": 0, "top_p": 0.5, "n": 3,
          "stop": "\n", "logprobs": 0, "seed": -4, "stream": true, "echo": false,
          "presence_penalty": 0, "best_of": 3, "user": "me", "logit_bias": {}})",
      &r);
  ASSERT_TRUE(e.ok()) << e.message;
  EXPECT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.logprobs, 0);
  EXPECT_EQ(r.seed, (std::uint64_t)-4);
  EXPECT_TRUE(r.stream);
}

TEST(ServeCompletionRequest, BadBodies) {
  expect_all_rejected<CompletionRequest>(kBodyCases, parse_completion_request);
}

TEST(ServeCompletionRequest, BadFields) {
  expect_all_rejected<CompletionRequest>(
      {
          {"{}", "prompt", "prompt is required"},
          {R"({"prompt": 5})", "prompt",
           "prompt must be a string or a list of strings, got the "
           "integer 5"},
          {R"({"prompt": [1, 2]})", "prompt", "token-id prompts are not supported"},
          {R"({"prompt": []})", "prompt", "must not be an empty list"},
          {R"({"prompt": ["a", {}]})", "prompt[1]", "prompt[1] must be a string, got an object"},
          {R"({"prompt": "a", "model": 3})", "model", "model must be a string"},
          {R"({"prompt": "a", "max_tokens": -5})", "max_tokens",
           "max_tokens must be an integer >= 0, got the integer -5"},
          {R"({"prompt": "a", "max_tokens": true})", "max_tokens", "got true"},
          {R"({"prompt": "a", "temperature": 2.5})", "temperature",
           "temperature must be a number in [0, 2], got the number 2.5"},
          {R"({"prompt": "a", "top_p": -0.1})", "top_p", "top_p must be a number in [0, 1]"},
          {R"({"prompt": "a", "n": 0})", "n", "n must be an integer in [1, 128]"},
          {R"({"prompt": ["a", "b", "c"], "n": 50})", "n", "asks for more than 128 completions"},
          {R"({"prompt": "a", "stop": ["a", "b", "c", "d", "e"]})", "stop", "at most 4"},
          {R"({"prompt": "a", "stop": [""]})", "stop", "stop strings must not be empty"},
          {R"({"prompt": "a", "stop": 7})", "stop", "stop must be a string or a list of strings"},
          {R"({"prompt": "a", "logprobs": 6})", "logprobs",
           "logprobs must be an integer in [0, 5]"},
          {R"({"prompt": "a", "logprobs": true})", "logprobs", "got true"},
          {R"({"prompt": "a", "seed": "x"})", "seed", "seed must be an integer"},
          {R"({"prompt": "a", "stream": "yes"})", "stream", "stream must be true or false"},
          {R"({"prompt": "a", "echo": true})", "echo", "echo is not supported"},
          {R"({"prompt": "a", "suffix": "b"})", "suffix", "suffix is not supported"},
          {R"({"prompt": "a", "frequency_penalty": 1})", "frequency_penalty", "not supported"},
          {R"({"prompt": "a", "best_of": 2})", "best_of", "not supported"},
          {R"({"prompt": "a", "logit_bias": {"1": 5}})", "logit_bias", "not supported"},
      },
      parse_completion_request);
}

class ServeSequences : public Gpt2TokenizerSuite {
 protected:
  ModelLimits limits_{32};
};

TEST_F(ServeSequences, MegatronPromptsSamplingAndBos) {
  MegatronRequest r;
  ASSERT_TRUE(parse_megatron_request(R"({"prompts": ["Hello world", ""], "add_BOS": true,
                                 "top_k": 1, "tokens_to_generate": 4, "random_seed": 9})",
                                     &r)
                  .ok());
  std::vector<generation::GenerationRequest> seqs;
  ASSERT_TRUE(megatron_sequences(r, *tok_, limits_, 123, &seqs).ok());
  ASSERT_EQ(seqs.size(), 2u);
  EXPECT_EQ(seqs[0].prompt, (std::vector<int>{50256, 15496, 995}));
  EXPECT_EQ(seqs[1].prompt, std::vector<int>{50256});
  EXPECT_TRUE(seqs[0].sampling.is_greedy());  // Megatron: top_k = 1 is greedy
  EXPECT_EQ(seqs[0].sampling.top_p, 1.f);     // Megatron's top_p 0 is "off"
  EXPECT_EQ(seqs[0].sampling.seed, 9u);
  EXPECT_NE(seqs[1].sampling.seed, 9u);
  EXPECT_EQ(seqs[0].tokens_to_generate, 4);
}

TEST_F(ServeSequences, CompletionChoicesAndSeeds) {
  CompletionRequest r;
  ASSERT_TRUE(parse_completion_request(R"({"prompt": ["a", ""], "n": 2, "stop": ["x"],
                                           "logprobs": 1, "temperature": 0.7})",
                                       &r)
                  .ok());
  std::vector<generation::GenerationRequest> seqs;
  ASSERT_TRUE(completion_sequences(r, *tok_, limits_, 55, &seqs).ok());
  ASSERT_EQ(seqs.size(), 4u);  // prompt-major: a, a, "", ""
  EXPECT_EQ(seqs[0].prompt, seqs[1].prompt);
  EXPECT_EQ(seqs[2].prompt, std::vector<int>{50256});  // empty prompt: <|endoftext|>
  EXPECT_EQ(seqs[0].sampling.seed, 55u);
  EXPECT_NE(seqs[1].sampling.seed, seqs[0].sampling.seed);  // n choices differ
  EXPECT_FLOAT_EQ(seqs[0].sampling.temperature, 0.7f);
  EXPECT_FALSE(seqs[0].sampling.is_greedy());
  EXPECT_TRUE(seqs[0].logprobs);
  EXPECT_EQ(seqs[3].stop, std::vector<std::string>{"x"});
  ASSERT_TRUE(parse_completion_request(R"({"prompt": "a", "top_p": 0})", &r).ok());
  ASSERT_TRUE(completion_sequences(r, *tok_, limits_, 55, &seqs).ok());
  EXPECT_TRUE(seqs[0].sampling.is_greedy());
}

TEST_F(ServeSequences, ContextIsChecked) {
  CompletionRequest r;
  std::vector<generation::GenerationRequest> seqs;
  ASSERT_TRUE(
      parse_completion_request(R"({"prompt": ["a", "Hello world"], "max_tokens": 31})", &r).ok());
  ApiError e = completion_sequences(r, *tok_, limits_, 1, &seqs);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "max_tokens");
  EXPECT_EQ(e.code, "context_length_exceeded");
  EXPECT_EQ(e.message,
            "prompt[1] is 2 tokens; with max_tokens = 31 that exceeds the context of "
            "32 tokens (--max-sequence-length)");
  ASSERT_TRUE(
      parse_completion_request(R"({"prompt": "a", "max_tokens": 9223372036854775807})", &r).ok());
  e = completion_sequences(r, *tok_, limits_, 1, &seqs);
  EXPECT_EQ(e.code, "context_length_exceeded");
  MegatronRequest m;
  ASSERT_TRUE(parse_megatron_request(R"({"prompts": ["a"], "tokens_to_generate": 31})", &m).ok());
  EXPECT_TRUE(megatron_sequences(m, *tok_, limits_, 1, &seqs).ok());  // 1 + 31 = 32 fits
  ASSERT_TRUE(parse_megatron_request(R"({"prompts": ["a"], "tokens_to_generate": 32})", &m).ok());
  e = megatron_sequences(m, *tok_, limits_, 1, &seqs);
  EXPECT_EQ(e.param, "tokens_to_generate");
  EXPECT_NE(e.message.find("prompts[0] is 1 tokens"), std::string::npos) << e.message;
}

// --max-prompt-chars refuses by bytes before tokenizing; --max-prompt-tokens by tokens
// ("Hello world" is 2 GPT-2 tokens, 11 bytes).
TEST_F(ServeSequences, PromptLimitsAreChecked) {
  ModelLimits limits = limits_;
  limits.max_prompt_chars = 10;
  CompletionRequest r;
  std::vector<generation::GenerationRequest> seqs;
  ASSERT_TRUE(parse_completion_request(R"({"prompt": ["a", "Hello world"]})", &r).ok());
  ApiError e = completion_sequences(r, *tok_, limits, 1, &seqs);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "prompt_too_long");
  EXPECT_EQ(e.param, "prompt[1]");
  EXPECT_EQ(e.message, "prompt[1] is 11 bytes; the server takes at most 10 (--max-prompt-chars)");
  limits.max_prompt_chars = 11;
  EXPECT_TRUE(completion_sequences(r, *tok_, limits, 1, &seqs).ok());
  limits.max_prompt_tokens = 1;
  MegatronRequest m;
  ASSERT_TRUE(
      parse_megatron_request(R"({"prompts": ["Hello world"], "tokens_to_generate": 1})", &m).ok());
  e = megatron_sequences(m, *tok_, limits, 1, &seqs);
  EXPECT_EQ(e.code, "prompt_too_long");
  EXPECT_EQ(e.message, "prompts[0] is 2 tokens; the server takes at most 1 (--max-prompt-tokens)");
  limits.max_prompt_tokens = 2;
  EXPECT_TRUE(megatron_sequences(m, *tok_, limits, 1, &seqs).ok());
}

TEST(ServeErrors, JsonShape) {
  ApiError e = bad_request("top_k", "top_k must be an integer in [0, 1000]");
  EXPECT_EQ(error_json(e), R"({"error":{"message":"top_k must be an integer in [0, 1000]",)"
                           R"("type":"invalid_request_error","param":"top_k","code":null}})");
  e.message = "bad \xff byte";  // never throws on non-UTF-8
  EXPECT_NE(error_json(e).find("bad"), std::string::npos);
}

}  // namespace
}  // namespace trident::serve
