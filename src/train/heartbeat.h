#pragma once
// A line while a long iteration runs, so that a slow step is told from a hung job:
// "iteration 12 still running after 30s (the last took 8.1 s)", every --heartbeat-seconds
// until the step ends. A thread of its own waits on the clock; it writes to the log only
// while the main thread is inside the step, under a mutex the main thread takes to leave
// it, so the two never write at once.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <ostream>
#include <thread>

namespace trident::train {

class Heartbeat {
 public:
  // period_seconds <= 0: no thread, begin/end do nothing (ranks other than 0, or turned off).
  Heartbeat(std::ostream& log, double period_seconds);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // The main thread, around each step: the heartbeat may write between the two calls only.
  void begin(long iteration);
  void end(double step_seconds);

 private:
  using Clock = std::chrono::steady_clock;
  void beat();                              // the thread's loop
  void write_line(double running_seconds);  // under mutex_

  std::ostream& log_;
  const double period_;
  std::mutex mutex_;
  std::condition_variable changed_;
  // Under mutex_:
  bool stop_ = false, in_step_ = false;
  long iteration_ = 0, steps_begun_ = 0;
  Clock::time_point step_start_;
  double last_step_seconds_ = -1;  // < 0: no step has finished yet
  std::thread thread_;             // started last, once the fields above exist
};

}  // namespace trident::train
