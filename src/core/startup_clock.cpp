#include "core/startup_clock.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>

namespace trident {

namespace {
constexpr double kProgressEvery = 2.0;  // seconds
}

double process_age_seconds() {
  std::ifstream stat("/proc/self/stat");
  std::string text;
  std::getline(stat, text);
  const size_t name_end = text.rfind(')');  // the command name may hold spaces
  if (name_end == std::string::npos) return 0;
  std::istringstream fields(text.substr(name_end + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field;) ++i;  // fields 3..21 (state .. itrealvalue)
  unsigned long long start_ticks = 0;
  timespec boot{};
  if (!(fields >> start_ticks) || clock_gettime(CLOCK_BOOTTIME, &boot) != 0) return 0;
  const double age = boot.tv_sec + boot.tv_nsec * 1e-9 - (double)start_ticks / sysconf(_SC_CLK_TCK);
  return std::max(age, 0.0);
}

StartupClock::StartupClock(std::ostream& log) : log_(log) {
  const double age = process_age_seconds();
  start_ = std::chrono::steady_clock::now() -
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
               std::chrono::duration<double>(age));
  if (age > 0) phases_.emplace_back("launch", age);
}

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
