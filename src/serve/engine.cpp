#include "serve/engine.h"

#include <stdexcept>

namespace trident::serve {

namespace {

ApiError unavailable(const std::string& message, const std::string& code) {
  ApiError e;
  e.status = 503;
  e.type = "server_error";
  e.message = message;
  e.code = code;
  return e;
}

}  // namespace

Engine::Engine(Batcher& batcher, int max_queue) : batcher_(batcher), max_queue_(max_queue) {}

ApiError Engine::submit(std::shared_ptr<Job> job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || draining_) return unavailable("the server is shutting down", "shutting_down");
  if ((int)queue_.size() >= max_queue_)
    return unavailable("the server is busy: " + std::to_string(queue_.size()) +
                           " requests are already waiting (--max-queue); retry later",
                       "queue_full");
  queue_.push_back(std::move(job));
  cv_.notify_all();
  return {};
}

void Engine::notify() {
  std::lock_guard<std::mutex> lock(mu_);
  woken_ = true;
  cv_.notify_all();
}

std::string Engine::validate(const generation::GenerationRequest& r) const {
  return batcher_.validate(r);
}

EngineStats Engine::stats() const {
  EngineStats s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.queued = (int)queue_.size();
  }
  s.running = running_count_.load();
  s.completed = completed_.load();
  s.cancelled = cancelled_.load();
  s.generated_tokens = generated_.load();
  return s;
}

void Engine::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;
  cv_.notify_all();
}

void Engine::drain(std::chrono::steady_clock::time_point deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
  drain_deadline_ = deadline;
  cv_.notify_all();
}

// Sleeps while nothing runs and nothing waits. False once stopping, or draining and either
// done or out of time.
bool Engine::wait_for_work() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto idle = [&] { return running_.empty() && !admitting_; };
  if (idle()) cv_.wait(lock, [&] { return stopping_ || woken_ || draining_ || !queue_.empty(); });
  woken_ = false;
  if (draining_ &&
      ((idle() && queue_.empty()) || std::chrono::steady_clock::now() >= drain_deadline_))
    return false;
  return !stopping_;
}

// Clients that went away: their running sequences end at the next step (the generator
// reports them finished, "cancelled"); their waiting sequences never start.
void Engine::cancel_abandoned() {
  for (auto& [id, r] : running_)
    if (!r.cancelling && r.job->cancelled()) {
      batcher_.cancel(id);
      r.cancelling = true;
      cancelled_.fetch_add(1);
    }
  if (admitting_ && admitting_->cancelled()) {
    cancelled_.fetch_add((long)admitting_->sequences().size() - next_sequence_);
    admitting_.reset();
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(queue_, [this](const std::shared_ptr<Job>& j) {
    const bool gone = j->cancelled();
    if (gone) cancelled_.fetch_add((long)j->sequences().size());
    return gone;
  });
}

// Fills free slots in arrival order; a job's sequences start one after another as slots free.
void Engine::admit() {
  while (batcher_.free_slots() > 0) {
    if (!admitting_) {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return;
      admitting_ = std::move(queue_.front());
      queue_.pop_front();
      next_sequence_ = 0;
    }
    const int s = next_sequence_++;
    std::shared_ptr<Job> job = admitting_;
    if (next_sequence_ == (int)job->sequences().size()) admitting_.reset();
    long id = -1;
    try {
      id = batcher_.add(job->sequences()[s], [this, job, s](const generation::TokenEvent& e) {
        job->deliver(s, e);
        if (e.token >= 0) generated_.fetch_add(1);
        if (e.finished) finished_ids_.push_back(e.request);
      });
    } catch (const std::invalid_argument& e) {  // validated on submit; a bug if it happens
      job->fail(bad_request("", e.what()));
      if (admitting_ == job) admitting_.reset();
      continue;
    }
    running_[id] = {job, s, false};
  }
}

void Engine::step() {
  finished_ids_.clear();
  batcher_.step();
  for (long id : finished_ids_) {
    auto it = running_.find(id);
    if (it == running_.end()) continue;
    Running done = std::move(it->second);
    running_.erase(it);
    running_count_.store((int)running_.size());
    completed_.fetch_add(1);  // counted before the handler wakes
    generation::GenerationResult r;
    if (batcher_.take_result(id, &r)) {
      done.job->finish(done.sequence, std::move(r));
    } else {  // never expected; a waiting client must not hang on it
      ApiError e;
      e.status = 500;
      e.type = "server_error";
      e.message =
          "the generator reported request " + std::to_string(id) + " finished without a result";
      done.job->fail(e);
    }
  }
}

void Engine::fail_all(const ApiError& e) {
  for (auto& [id, r] : running_) r.job->fail(e);
  running_.clear();
  running_count_.store(0);
  if (admitting_) admitting_->fail(e), admitting_.reset();
  std::lock_guard<std::mutex> lock(mu_);
  stopping_ = true;  // nothing is accepted after this
  for (auto& j : queue_) j->fail(e);
  queue_.clear();
}

void Engine::run() {
  try {
    while (wait_for_work()) {
      cancel_abandoned();
      admit();
      running_count_.store((int)running_.size());
      if (!running_.empty()) step();
    }
  } catch (const std::exception& ex) {
    ApiError e;
    e.status = 500;
    e.type = "server_error";
    e.message = std::string("generation failed: ") + ex.what();
    fail_all(e);
    throw;
  }
  fail_all(unavailable("the server is shutting down", "shutting_down"));
}

}  // namespace trident::serve
