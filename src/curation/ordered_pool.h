#pragma once
// A fixed pool of worker threads over a queue of jobs whose results are taken back in
// submission order, so output order does not depend on --workers. The caller bounds memory
// by taking results back before in_flight() reaches capacity() (as `trident preprocess`), as
// submit_bounded does.
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace trident::curation {

template <class Job, class Result>
class OrderedPool {
 public:
  OrderedPool(int workers, std::function<Result(Job&)> fn) : fn_(std::move(fn)) {
    for (int w = 0; w < std::max(1, workers); ++w) threads_.emplace_back([this] { work(); });
  }
  ~OrderedPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  size_t capacity() const { return 2 * threads_.size() + 2; }
  size_t in_flight() {
    std::lock_guard<std::mutex> lock(mu_);
    return in_flight_;
  }
  void submit(Job job) {
    std::lock_guard<std::mutex> lock(mu_);
    ++in_flight_;
    queue_.emplace_back(submitted_++, std::move(job));
    cv_.notify_one();
  }
  // The next result in order if ready (or, with wait, once it is). A job that threw rethrows
  // here, in the caller's thread.
  bool next(Result* out, bool wait) {
    std::unique_lock<std::mutex> lock(mu_);
    if (wait) done_.wait(lock, [&] { return results_.count(next_) > 0; });
    auto it = results_.find(next_);
    if (it == results_.end()) return false;
    auto [result, error] = std::move(it->second);
    results_.erase(it);
    ++next_;
    --in_flight_;
    if (error) std::rethrow_exception(error);
    *out = std::move(result);
    return true;
  }
  // Submits job once fewer than capacity() are in flight, handing each result taken back
  // meanwhile to consume; then hands it those already done, without waiting.
  template <class Consume>
  void submit_bounded(Job job, Consume&& consume) {
    Result r;
    while (in_flight() >= capacity()) next(&r, true), consume(r);
    submit(std::move(job));
    while (next(&r, false)) consume(r);
  }
  // Waits for every job still in flight, handing each result to consume in order.
  template <class Consume>
  void drain(Consume&& consume) {
    Result r;
    while (in_flight() > 0) next(&r, true), consume(r);
  }

 private:
  void work() {
    for (;;) {
      std::pair<long, Job> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
        if (queue_.empty()) return;
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      Result r{};
      std::exception_ptr error;
      try {
        r = fn_(job.second);
      } catch (...) {
        error = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        results_.emplace(job.first, std::make_pair(std::move(r), error));
      }
      done_.notify_all();
    }
  }

  std::function<Result(Job&)> fn_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_, done_;
  std::deque<std::pair<long, Job>> queue_;
  std::map<long, std::pair<Result, std::exception_ptr>> results_;
  long submitted_ = 0, next_ = 0;
  size_t in_flight_ = 0;
  bool closing_ = false;
};

}  // namespace trident::curation
