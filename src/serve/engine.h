#pragma once
// The serving loop. The thread that owns the model (the main thread, which also owns MPI)
// calls run(): it moves waiting jobs' sequences into free generator slots, steps the running
// batch, hands each token event and result to its job, ends the sequences of jobs whose
// client went away, and sleeps while there is nothing to do. HTTP handler threads only
// submit jobs and wait on them.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "serve/batcher.h"
#include "serve/job.h"

namespace trident::serve {

struct EngineStats {
  int queued = 0;   // jobs waiting for a first slot
  int running = 0;  // sequences in the batch
  long completed = 0;
  long cancelled = 0;  // sequences ended or dropped because their client went away
  long generated_tokens = 0;
};

class Engine {
 public:
  Engine(Batcher& batcher, int max_queue);

  // Handler threads. Queues the job (503 when max_queue jobs already wait, or shutting down).
  ApiError submit(std::shared_ptr<Job> job);
  // Wakes the loop (a job was cancelled).
  void notify();
  std::string validate(const generation::GenerationRequest& r) const;
  EngineStats stats() const;

  // Any thread: ends run() (outstanding jobs fail with 503).
  void stop();
  // Any thread: new jobs are refused (503); run() ends once the jobs already accepted are
  // answered, or at `deadline` (those still outstanding then fail with 503).
  void drain(std::chrono::steady_clock::time_point deadline);

  // The model's thread: serves until stop(). A model failure fails every job (500) and is
  // rethrown.
  void run();

 private:
  struct Running {
    std::shared_ptr<Job> job;
    int sequence = 0;
    bool cancelling = false;
  };
  bool wait_for_work();
  void cancel_abandoned();
  void admit();
  void step();
  void fail_all(const ApiError& e);

  Batcher& batcher_;
  const int max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;                // guarded by mu_
  bool stopping_ = false, woken_ = false;                 // guarded by mu_
  bool draining_ = false;                                 // guarded by mu_
  std::chrono::steady_clock::time_point drain_deadline_;  // guarded by mu_
  std::atomic<int> running_count_{0};
  std::atomic<long> completed_{0}, cancelled_{0}, generated_{0};

  // The engine thread's own: the job being admitted (its next sequence), and what runs.
  std::shared_ptr<Job> admitting_;
  int next_sequence_ = 0;
  std::unordered_map<long, Running> running_;
  std::vector<long> finished_ids_;
};

}  // namespace trident::serve
