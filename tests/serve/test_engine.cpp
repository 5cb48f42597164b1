// `trident serve`'s engine loop and answers, with a fake generator in place of the model:
// jobs run to completion, a full queue answers 503, a cancelled job's sequences end, stop()
// fails what is left, a failing step fails every waiting request; the JSON of both APIs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "serve/engine.h"
#include "serve/responses.h"
#include "serve/serve_test_util.h"
#include "tokenizer/gpt2_tokenizer.h"

namespace trident::serve {
namespace {

using generation::GenerationRequest;
using generation::GenerationResult;
using generation::TokenEvent;

// Each running request gains token 65 + (its count so far) per step, as the generator does;
// it finishes after tokens_to_generate tokens, or "cancelled" at the step after cancel().
class FakeBatcher : public Batcher {
 public:
  explicit FakeBatcher(int slots) : slots_(slots) {}
  int free_slots() const override { return slots_ - (int)live_.size(); }
  long add(GenerationRequest r, generation::Generator::Callback cb) override {
    long id = next_id_++;
    live_.push_back({id, std::move(r), std::move(cb), {}, false});
    return id;
  }
  void cancel(long id) override {
    for (auto& s : live_)
      if (s.id == id) s.cancelled = true;
    ++cancels;
  }
  void step() override {
    ++steps;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a model takes time
    if (fail_at_step == steps) throw std::runtime_error("rank 1 is gone");
    for (auto it = live_.begin(); it != live_.end();) {
      TokenEvent e;
      e.request = it->id;
      if (!it->cancelled) {
        e.token = 65 + (int)it->tokens.size();
        e.text = std::string(1, (char)e.token);
        it->tokens.push_back(e.token);
      }
      e.finished = it->cancelled || (int)it->tokens.size() == it->request.tokens_to_generate;
      e.finish_reason = it->cancelled ? "cancelled" : "length";
      if (it->cb) it->cb(e);
      if (!e.finished) {
        ++it;
        continue;
      }
      GenerationResult r;
      r.prompt = it->request.prompt;
      r.tokens = it->tokens;
      for (int t : r.tokens) r.text += (char)t;
      r.finish_reason = e.finish_reason;
      done_[it->id] = r;
      it = live_.erase(it);
    }
  }
  bool take_result(long id, GenerationResult* out) override {
    auto it = done_.find(id);
    if (it == done_.end()) return false;
    *out = it->second;
    done_.erase(it);
    return true;
  }
  std::string validate(const GenerationRequest& r) const override {
    return r.tokens_to_generate > 100 ? "too long" : "";
  }
  std::atomic<int> steps{0}, cancels{0};
  int fail_at_step = -1;

 private:
  struct Seq {
    long id;
    GenerationRequest request;
    generation::Generator::Callback cb;
    std::vector<int> tokens;
    bool cancelled;
  };
  int slots_;
  long next_id_ = 1;
  std::vector<Seq> live_;
  std::map<long, GenerationResult> done_;
};

std::vector<GenerationRequest> sequences(std::vector<int> lengths) {
  std::vector<GenerationRequest> out;
  for (int n : lengths) {
    GenerationRequest r;
    r.prompt = {1, 2};
    r.tokens_to_generate = n;
    out.push_back(r);
  }
  return out;
}

// Runs the engine on a thread for the test's duration.
struct RunningEngine {
  explicit RunningEngine(int slots, int max_queue) : batcher(slots), engine(batcher, max_queue) {
    thread = std::thread([this] {
      try {
        engine.run();
      } catch (const std::exception&) {
        threw = true;
      }
    });
  }
  ~RunningEngine() {
    engine.stop();
    thread.join();
  }
  FakeBatcher batcher;
  Engine engine;
  std::thread thread;
  std::atomic<bool> threw{false};
};

TEST(ServeEngine, JobsShareTheBatchAndFinish) {
  RunningEngine run(4, 8);
  std::vector<std::shared_ptr<Job>> jobs;
  for (int j = 0; j < 5; ++j) {
    jobs.push_back(std::make_shared<Job>(sequences({3, 1 + j}), false));
    ASSERT_TRUE(run.engine.submit(jobs.back()).ok());
  }
  for (int j = 0; j < 5; ++j) {
    std::vector<GenerationResult> results;
    ApiError e;
    ASSERT_TRUE(jobs[j]->wait(&results, &e)) << e.message;
    ASSERT_EQ(results.size(), 2u);
    EXPECT_EQ(results[0].text, "ABC");
    EXPECT_EQ(results[1].text, std::string("ABCDE").substr(0, 1 + j));
  }
  EXPECT_EQ(run.engine.stats().completed, 10);
  EXPECT_EQ(run.engine.stats().generated_tokens, 5 * 3 + 1 + 2 + 3 + 4 + 5);
}

TEST(ServeEngine, StreamingDeliversEveryTokenThenFinishes) {
  RunningEngine run(2, 8);
  auto job = std::make_shared<Job>(sequences({4, 2}), true);
  ASSERT_TRUE(run.engine.submit(job).ok());
  std::string text[2];
  int finished = 0;
  std::vector<SequenceEvent> events;
  ApiError e;
  while (job->next_events(std::chrono::milliseconds(1000), &events, &e))
    for (const auto& ev : events) {
      text[ev.sequence] += ev.event.text;
      finished += ev.event.finished;
    }
  EXPECT_TRUE(e.ok());
  EXPECT_EQ(text[0], "ABCD");
  EXPECT_EQ(text[1], "AB");
  EXPECT_EQ(finished, 2);
}

TEST(ServeEngine, FullQueueAnswers503) {
  FakeBatcher batcher(1);
  Engine engine(batcher, 2);  // not running: nothing leaves the queue
  EXPECT_TRUE(engine.submit(std::make_shared<Job>(sequences({1}), false)).ok());
  EXPECT_TRUE(engine.submit(std::make_shared<Job>(sequences({1}), false)).ok());
  ApiError e = engine.submit(std::make_shared<Job>(sequences({1}), false));
  EXPECT_EQ(e.status, 503);
  EXPECT_EQ(e.code, "queue_full");
  EXPECT_NE(e.message.find("--max-queue"), std::string::npos);
}

TEST(ServeEngine, CancelledJobsEndAndFreeTheirSlots) {
  RunningEngine run(1, 8);
  auto gone = std::make_shared<Job>(sequences({100, 100}), true);
  ASSERT_TRUE(run.engine.submit(gone).ok());
  std::vector<SequenceEvent> events;
  ApiError e;
  ASSERT_TRUE(gone->next_events(std::chrono::milliseconds(5000), &events, &e));
  gone->cancel();
  run.engine.notify();
  // The next job gets the slot: the first sequence was cancelled, the second never started.
  auto next = std::make_shared<Job>(sequences({2}), false);
  ASSERT_TRUE(run.engine.submit(next).ok());
  std::vector<GenerationResult> results;
  ASSERT_TRUE(next->wait(&results, &e));
  EXPECT_EQ(results[0].text, "AB");
  EXPECT_EQ(run.batcher.cancels.load(), 1);
  EXPECT_EQ(run.engine.stats().cancelled, 2);  // one ended, one never started
  EXPECT_LT(run.batcher.steps.load(), 100);
}

TEST(ServeEngine, StopFailsWaitingJobsWith503) {
  FakeBatcher batcher(1);
  Engine engine(batcher, 8);
  auto job = std::make_shared<Job>(sequences({1}), false);
  ASSERT_TRUE(engine.submit(job).ok());
  engine.stop();
  engine.run();  // returns at once
  std::vector<GenerationResult> results;
  ApiError e;
  EXPECT_FALSE(job->wait(&results, &e));
  EXPECT_EQ(e.status, 503);
  EXPECT_EQ(engine.submit(std::make_shared<Job>(sequences({1}), false)).status, 503);
}

TEST(ServeEngine, FailingStepFailsEveryJobWith500) {
  FakeBatcher batcher(2);
  batcher.fail_at_step = 2;
  Engine engine(batcher, 8);
  auto a = std::make_shared<Job>(sequences({5}), false);
  auto b = std::make_shared<Job>(sequences({5, 5, 5}), false);
  ASSERT_TRUE(engine.submit(a).ok());
  ASSERT_TRUE(engine.submit(b).ok());
  EXPECT_THROW(engine.run(), std::runtime_error);
  std::vector<GenerationResult> results;
  ApiError e;
  EXPECT_FALSE(a->wait(&results, &e));
  EXPECT_EQ(e.status, 500);
  EXPECT_NE(e.message.find("rank 1 is gone"), std::string::npos);
  EXPECT_FALSE(b->wait(&results, &e));
  EXPECT_EQ(e.status, 500);
}

class ServeResponses : public Gpt2TokenizerSuite {
 protected:
  // "Hello" + " world" + "!" ; then an é split over two tokens (bytes c3, a9).
  static GenerationResult hello() {
    GenerationResult r;
    r.prompt = {15496};
    r.tokens = {995, 0};
    r.prompt_logprobs = {};
    r.logprobs = {-1.5f, -0.25f};
    r.text = " world!";
    r.finish_reason = "eod";
    return r;
  }
};

TEST_F(ServeResponses, Megatron) {
  auto j = nlohmann::json::parse(megatron_response({hello()}, *tok_, true));
  EXPECT_EQ(j["text"], nlohmann::json({"Hello world!"}));
  EXPECT_EQ(j["segments"], nlohmann::json({{"Hello", " world", "!"}}));
  EXPECT_EQ(j["logprobs"], nlohmann::json({{-1.5, -0.25}}));
  EXPECT_EQ(j["tokens"], nlohmann::json({{15496, 995, 0}}));
  j = nlohmann::json::parse(megatron_response({hello()}, *tok_, false));
  EXPECT_TRUE(j["logprobs"].is_null());
}

TEST_F(ServeResponses, Completion) {
  CompletionMeta meta{"cmpl-1", 1700000000, "tiny", true};
  GenerationResult second = hello();
  second.finish_reason = "length";
  auto j = nlohmann::json::parse(completion_response(meta, {hello(), second}, *tok_, 2));
  EXPECT_EQ(j["id"], "cmpl-1");
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "tiny");
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["text"], " world!");
  EXPECT_EQ(j["choices"][0]["index"], 0);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");  // <|endoftext|> is a stop
  EXPECT_EQ(j["choices"][1]["finish_reason"], "length");
  const auto& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], nlohmann::json({" world", "!"}));
  EXPECT_EQ(lp["token_logprobs"], nlohmann::json({-1.5, -0.25}));
  EXPECT_EQ(lp["text_offset"], nlohmann::json({5, 11}));  // after "Hello", after " world"
  EXPECT_TRUE(lp["top_logprobs"].is_null());
  // Prompt tokens once per prompt (n = 2 choices of one prompt).
  EXPECT_EQ(j["usage"],
            nlohmann::json({{"prompt_tokens", 1}, {"completion_tokens", 4}, {"total_tokens", 5}}));
  meta.logprobs = false;
  j = nlohmann::json::parse(completion_response(meta, {hello()}, *tok_, 1));
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
}

TEST_F(ServeResponses, StreamChunks) {
  CompletionMeta meta{"cmpl-2", 5, "tiny", true};
  StreamCursor cursor{5};
  TokenEvent e;
  e.token = 995;
  e.logprob = -1.5f;
  e.text = " world";
  std::string chunk = completion_chunk(meta, 3, e, *tok_, &cursor);
  ASSERT_EQ(chunk.substr(0, 6), "data: ");
  ASSERT_EQ(chunk.substr(chunk.size() - 2), "\n\n");
  auto j = nlohmann::json::parse(chunk.substr(6));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["index"], 3);
  EXPECT_EQ(j["choices"][0]["text"], " world");
  EXPECT_TRUE(j["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(j["choices"][0]["logprobs"]["text_offset"], nlohmann::json({5}));
  EXPECT_EQ(cursor.chars, 11);
  TokenEvent last;
  last.finished = true;
  last.finish_reason = "eod";
  j = nlohmann::json::parse(completion_chunk(meta, 3, last, *tok_, &cursor).substr(6));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(std::string(kStreamDone), "data: [DONE]\n\n");
}

TEST_F(ServeResponses, CharactersOfSplitTokens) {
  EXPECT_EQ(chars_started("\xc3"), 1);  // the token that starts é counts it
  EXPECT_EQ(chars_started("\xa9"), 0);  // the one that completes it does not
  EXPECT_EQ(chars_started("a\xc3\xa9z"), 3);
}

TEST(ServeModels, List) {
  auto j = nlohmann::json::parse(models_response("tiny", 42));
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "tiny");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["created"], 42);
}

}  // namespace
}  // namespace trident::serve
