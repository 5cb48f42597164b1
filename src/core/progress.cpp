#include "core/progress.h"

#include <cmath>
#include <cstdio>

namespace trident {

std::string format_duration(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  char buf[64];
  const long s = std::lround(seconds);
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%lds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  } else if (const long m = std::lround(seconds / 60); m < 24 * 60) {
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", m / 60, m % 60);
  } else {
    const long h = std::lround(seconds / 3600);
    std::snprintf(buf, sizeof buf, "%ldd%02ldh", h / 24, h % 24);
  }
  return buf;
}

void RecentIterations::add(double seconds) {
  seconds_.push_back(seconds);
  sum_ += seconds;
  if (seconds_.size() > window_) {
    sum_ -= seconds_.front();
    seconds_.pop_front();
  }
}

double RecentIterations::mean_seconds() const {
  return seconds_.empty() ? 0.0 : sum_ / (double)seconds_.size();
}

std::string format_progress(const std::string& what, long done, long total, const char* unit,
                            double elapsed_seconds) {
  std::string line = what + ": " + std::to_string(done) + "/" + std::to_string(total) + " " + unit +
                     ", " + format_duration(elapsed_seconds);
  if (done > 0 && done < total)
    line += ", about " + format_duration(elapsed_seconds / (double)done * (double)(total - done)) +
            " left";
  return line;
}

ProgressTicker::ProgressTicker(double period_seconds)
    : period_(period_seconds), next_(period_seconds) {}

double ProgressTicker::due(long done, long total) {
  return due_at(done, total, std::chrono::duration<double>(Clock::now() - start_).count());
}

double ProgressTicker::due_at(long done, long total, double elapsed_seconds) {
  if (done >= total || elapsed_seconds < next_) return -1;
  // The next report a period after this one, however late this one came.
  next_ = elapsed_seconds + period_;
  return elapsed_seconds;
}

}  // namespace trident
