#pragma once
// Slurm, an operator or a preempting scheduler asks a job to stop with a signal (SIGTERM, or
// the SIGUSR1 that `sbatch --signal=USR1@T` sends before the time limit; SIGINT from a
// terminal). While a StopSignals lives, those signals are only recorded: the training loop
// asks received() after each iteration, and the ranks agree to save and stop together.
// A second signal while the checkpoint is written is recorded again, and nothing is cut off.
#include <csignal>
#include <string>

namespace trident {

class StopSignals {
 public:
  // Installs the handlers (SA_RESTART: a write interrupted by a signal carries on); `enabled`
  // false installs none, and the signals keep their default action (the process ends).
  // The handlers stay to the end of the process: a signal that comes after the stop (Slurm
  // signals again, an impatient operator) must not end it with 143 after a clean save.
  explicit StopSignals(bool enabled);
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool enabled() const { return enabled_; }
  // The number of the first stop signal received, 0 while none has come.
  int received() const;

 private:
  bool enabled_;
};

// "SIGTERM", "SIGINT", "SIGUSR1"; "signal N" for any other.
std::string signal_name(int signal);

}  // namespace trident
