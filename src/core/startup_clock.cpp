#include "core/startup_clock.h"

#include <algorithm>
#include <iomanip>
#include <ostream>

namespace trident {

namespace {
constexpr double kProgressEvery = 2.0;  // seconds
}

StartupClock::StartupClock(std::ostream& log)
    : log_(log), start_(std::chrono::steady_clock::now()) {}

double StartupClock::since(std::chrono::steady_clock::time_point t) const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void StartupClock::begin(const std::string& phase) {
  end();
  phase_ = phase;
  phase_start_ = last_line_ = std::chrono::steady_clock::now();
}

void StartupClock::progress(double fraction) {
  if (phase_.empty() || since(last_line_) < kProgressEvery) return;
  last_line_ = std::chrono::steady_clock::now();
  log_ << "  " << phase_ << ": " << std::fixed << std::setprecision(0) << 100 * fraction
       << "% after " << std::setprecision(1) << since(phase_start_) << " s\n"
       << std::flush;
  log_.unsetf(std::ios::fixed);
}

void StartupClock::end() {
  if (phase_.empty()) return;
  const double seconds = since(phase_start_);
  auto same = [&](const auto& p) { return p.first == phase_; };  // a phase may recur per chunk
  auto it = std::find_if(phases_.begin(), phases_.end(), same);
  if (it == phases_.end())
    phases_.emplace_back(phase_, seconds);
  else
    it->second += seconds;
  phase_.clear();
}

void StartupClock::finish() {
  end();
  log_ << "start-up:" << std::fixed << std::setprecision(2);
  for (const auto& [name, seconds] : phases_) log_ << " " << name << " " << seconds << " s |";
  log_ << " total " << since(start_) << " s before step 1\n" << std::flush;
  log_.unsetf(std::ios::fixed);
  log_ << std::setprecision(6);
}

}  // namespace trident
