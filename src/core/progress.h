#pragma once
// How a long run tells where it stands: durations as people read them, the time left from
// the recent iterations' average, and a progress line every few seconds while something
// long (an evaluation) runs.
#include <chrono>
#include <cstddef>
#include <deque>
#include <string>

namespace trident {

// Whole seconds below a minute ("7s"), then minutes and seconds ("1m23s"), hours and
// minutes ("2h05m"), days and hours ("3d04h"); rounded to the unit shown last.
std::string format_duration(double seconds);

// The durations of the latest `window` iterations: what the next ones will likely take
// (the first iterations, which also allocate, drop out once the window has moved on).
class RecentIterations {
 public:
  explicit RecentIterations(std::size_t window = 20) : window_(window) {}
  void add(double seconds);
  double mean_seconds() const;  // 0 before the first
  double eta_seconds(long iterations_left) const { return mean_seconds() * iterations_left; }

 private:
  std::size_t window_;
  std::deque<double> seconds_;
  double sum_ = 0;
};

// "validation: 3/10 batches, 6s, about 14s left": `left` extrapolates the mean so far.
std::string format_progress(const std::string& what, long done, long total, const char* unit,
                            double elapsed_seconds);

// Decides when a long piece of work reports its progress: once `period` seconds have passed
// since it began or since the last report, and only while some of it remains.
class ProgressTicker {
 public:
  explicit ProgressTicker(double period_seconds);
  // The elapsed seconds when a report is due after `done` of `total`, else a negative value.
  double due(long done, long total);
  // As due(), at a given elapsed time (for tests).
  double due_at(long done, long total, double elapsed_seconds);

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_ = Clock::now();
  double period_, next_;
};

}  // namespace trident
