#include "train/heartbeat.h"

#include <cstdio>

namespace trident::train {

Heartbeat::Heartbeat(std::ostream& log, double period_seconds)
    : log_(log), period_(period_seconds) {
  if (period_ > 0) thread_ = std::thread([this] { beat(); });
}

Heartbeat::~Heartbeat() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void Heartbeat::begin(long iteration) {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    in_step_ = true;
    iteration_ = iteration;
    ++steps_begun_;
    step_start_ = Clock::now();
  }
  changed_.notify_all();
}

void Heartbeat::end(double step_seconds) {
  if (!thread_.joinable()) return;
  // Once this lock is held the thread is not writing, and after it is released the thread
  // sees in_step_ false and writes nothing until the next begin().
  std::lock_guard<std::mutex> lock(mutex_);
  in_step_ = false;
  last_step_seconds_ = step_seconds;
}

void Heartbeat::beat() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    if (!in_step_) {
      changed_.wait(lock, [this] { return stop_ || in_step_; });
      continue;
    }
    const long step = steps_begun_;
    const auto period =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(period_));
    for (int beats = 1;; ++beats) {
      const Clock::time_point when = step_start_ + beats * period;
      const bool moved = changed_.wait_until(
          lock, when, [&] { return stop_ || !in_step_ || steps_begun_ != step; });
      if (moved) break;
      write_line(beats * period_);
    }
  }
}

void Heartbeat::write_line(double running_seconds) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "iteration %ld still running after %g s", iteration_,
                running_seconds);
  log_ << buf;
  if (last_step_seconds_ >= 0) {
    std::snprintf(buf, sizeof buf, " (the last took %.1f s)", last_step_seconds_);
    log_ << buf;
  }
  log_ << "\n" << std::flush;
}

}  // namespace trident::train
