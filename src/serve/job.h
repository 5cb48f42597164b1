#pragma once
// One HTTP request's generation work, shared by the handler thread that waits on it and the
// engine thread that runs it: its sequences, and a channel (mutex + condition variable) that
// carries token events, results and failure from the engine to the handler, and cancellation
// from the handler (a client that went away) to the engine.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "generation/generator.h"
#include "serve/api_error.h"

namespace trident::serve {

struct SequenceEvent {
  int sequence = 0;
  generation::TokenEvent event;
};

class Job {
 public:
  Job(std::vector<generation::GenerationRequest> sequences, bool stream);

  const std::vector<generation::GenerationRequest>& sequences() const { return sequences_; }
  bool stream() const { return stream_; }

  // Engine side.
  void deliver(int sequence, const generation::TokenEvent& e);  // kept only when streaming
  void finish(int sequence, generation::GenerationResult r);
  void fail(const ApiError& e);
  bool cancelled() const { return cancelled_.load(); }

  // Handler side. Marks the job abandoned; the engine ends its sequences at its next step.
  void cancel() { cancelled_.store(true); }
  // Blocks until every sequence finished or the job failed; false on failure (*error set).
  bool wait(std::vector<generation::GenerationResult>* results, ApiError* error);
  // Streaming: moves the events that arrived into *out, waiting up to `timeout` for one.
  // Returns false once nothing more will come (all delivered, or failed: *error set).
  bool next_events(std::chrono::milliseconds timeout, std::vector<SequenceEvent>* out,
                   ApiError* error);

 private:
  bool done_locked() const { return failed_ || finished_ == (int)sequences_.size(); }

  const std::vector<generation::GenerationRequest> sequences_;
  const bool stream_;
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<SequenceEvent> events_;
  std::vector<generation::GenerationResult> results_;
  int finished_ = 0;
  bool failed_ = false;
  ApiError error_;
};

}  // namespace trident::serve
