#pragma once
// The phases between launch and step 1 (launch itself: the process's start, MPI and the
// process groups up to the clock's construction; allocation, initialisation or checkpoint
// load, data indices, peak measurement), timed and printed before training starts, the total
// counted from the process's start; a phase that runs longer than 2 s prints a progress line
// every 2 s, so a big model never looks hung.
#include <chrono>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

namespace trident {

// Seconds since this process started (the kernel's start time against CLOCK_BOOTTIME; 10 ms
// resolution), 0 where /proc cannot tell.
double process_age_seconds();

class StartupClock {
 public:
  // The first phase, "launch", is the process's age now.
  explicit StartupClock(std::ostream& log);
  // Ends the running phase (if any) and starts `phase`.
  void begin(const std::string& phase);
  // The running phase is `fraction` done: a progress line if 2 s passed since the last one.
  void progress(double fraction);
  // Ends the running phase and prints every phase and the total since construction.
  void finish();

 private:
  void end();
  double since(std::chrono::steady_clock::time_point t) const;

  std::ostream& log_;
  std::chrono::steady_clock::time_point start_, phase_start_, last_line_;
  std::string phase_;
  std::vector<std::pair<std::string, double>> phases_;
};

}  // namespace trident
