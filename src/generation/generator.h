#pragma once
// Continuous batching over an InferenceModel: requests join the running batch at the next
// step (their prompt is prefilled in that step), every running request gains one token per
// step, and a finished request leaves and frees its KV-cache slot at once. The calling thread
// drives it; it is not thread-safe (the server feeds it from a queue on one engine thread).
// Under tensor / pipeline parallelism it runs on world rank 0 only; the model's other ranks
// follow (InferenceModel::follow).
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "generation/inference_model.h"
#include "generation/sampling.h"
#include "tokenizer/tokenizer.h"

namespace trident::generation {

struct GenerationRequest {
  std::vector<int> prompt;      // token ids; 1 <= size, size + tokens_to_generate <= max sequence
  int tokens_to_generate = 32;  // >= 0 (0: only score the prompt)
  SamplingParams sampling;
  bool logprobs = false;          // log-probabilities of prompt (from the 2nd) and new tokens
  int top_logprobs = 0;           // with logprobs: also the N (<= 20) likeliest at each new token
  std::vector<std::string> stop;  // stop strings: the text ends before the first one
  bool stop_on_eod = true;        // end at the tokenizer's <|endoftext|> (not included)
  bool stop_on_eol = false;       // end after a token containing a newline
};

// Empty when the request fits the model (vocabulary, lengths, sampling), else why not.
std::string validate(const GenerationRequest& r, const InferenceModel& model);

// Told about each new token of a request (and once more, finished, at the end).
struct TokenEvent {
  long request = 0;
  int token = -1;       // -1 on the final event when no token came with it
  float logprob = NAN;  // of token (NaN unless logprobs were asked for)
  std::vector<std::pair<int, float>> top_logprobs;  // (id, logprob), likeliest first, if asked
  std::string text;  // new complete UTF-8 text since the last event (may be empty)
  bool finished = false;
  std::string finish_reason;  // "length", "stop" (stop string or EOL), "eod", "cancelled"
};

struct GenerationResult {
  std::vector<int> prompt;
  std::vector<int> tokens;             // generated: EOD excluded; a stop string's tokens kept
  std::vector<float> prompt_logprobs;  // prompt.size() - 1 values when logprobs
  std::vector<float> logprobs;         // tokens.size() values when logprobs
  // Per generated token, its top_logprobs likeliest (id, logprob), when asked for.
  std::vector<std::vector<std::pair<int, float>>> top_logprobs;
  std::string text;  // decoded generated text, cut before a stop string
  std::string finish_reason;
};

// Where the time went: steps that only prefilled, only decoded, or both.
struct GeneratorStats {
  long prefill_tokens = 0, decode_tokens = 0, mixed_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0, mixed_seconds = 0;
  long steps = 0;
};

class Generator {
 public:
  using Callback = std::function<void(const TokenEvent&)>;
  // tokenizer: for stop strings, EOL and the text of events; may be null (no text, no stops).
  Generator(InferenceModel& model, const tokenizer::Tokenizer* tokenizer);
  ~Generator();

  int free_slots() const;
  int running() const;
  bool idle() const { return running() == 0; }
  // Queues r to join at the next step (free_slots() must be > 0; validate(r) must be empty,
  // else std::invalid_argument). on_event may be empty. Returns the request's id.
  long add(GenerationRequest r, Callback on_event = {});
  // Ends a request at the next step (a client that went away); unknown ids are ignored.
  void cancel(long request);
  // Prefills the requests added since the last step and adds a token to every running one.
  void step();
  // The result of a finished request (once; then forgotten). False while it runs.
  bool take_result(long request, GenerationResult* out);

  const InferenceModel& model() const { return model_; }
  const GeneratorStats& stats() const { return stats_; }

 private:
  struct Sequence;
  std::vector<Segment> plan_step();
  void count_step(const std::vector<Segment>& segments, double seconds);
  void take_logits(Sequence& s, const Segment& seg, const float* logits);
  using TopLogprobs = std::vector<std::pair<int, float>>;
  void append_token(Sequence& s, int id, float logprob, TopLogprobs top);
  void emit(Sequence& s, int token, float logprob, const TopLogprobs& top);
  void finish(Sequence& s, const std::string& reason);
  void retire_finished();

  InferenceModel& model_;
  const tokenizer::Tokenizer* tokenizer_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in the order they joined
  std::vector<bool> slot_used_;
  std::vector<std::pair<long, GenerationResult>> done_;
  std::vector<float> scratch_;
  long next_id_ = 1;
  GeneratorStats stats_;
};

// Runs every request to completion through one Generator (continuous batching, at most
// max_batch at a time); results in request order.
std::vector<GenerationResult> generate_all(Generator& g, const std::vector<GenerationRequest>& rs);

}  // namespace trident::generation
