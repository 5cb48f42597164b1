#include "serve/job.h"

namespace trident::serve {

Job::Job(std::vector<generation::GenerationRequest> sequences, bool stream)
    : sequences_(std::move(sequences)), stream_(stream), results_(sequences_.size()) {}

void Job::deliver(int sequence, const generation::TokenEvent& e) {
  if (!stream_) return;
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back({sequence, e});
  cv_.notify_all();
}

void Job::finish(int sequence, generation::GenerationResult r) {
  std::lock_guard<std::mutex> lock(mu_);
  results_[sequence] = std::move(r);
  ++finished_;
  cv_.notify_all();
}

void Job::fail(const ApiError& e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_) return;
  failed_ = true;
  error_ = e;
  cv_.notify_all();
}

bool Job::wait(std::vector<generation::GenerationResult>* results, ApiError* error) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_locked(); });
  if (failed_) {
    *error = error_;
    return false;
  }
  *results = std::move(results_);
  return true;
}

bool Job::next_events(std::chrono::milliseconds timeout, std::vector<SequenceEvent>* out,
                      ApiError* error) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !events_.empty() || done_locked(); });
  out->assign(events_.begin(), events_.end());
  events_.clear();
  if (failed_) {
    *error = error_;
    return false;
  }
  // Finished with every event handed out: the caller writes these and stops.
  return !(finished_ == (int)sequences_.size() && out->empty());
}

}  // namespace trident::serve
