#pragma once
// Slurm, an operator or a preempting scheduler asks a job to stop with a signal (SIGTERM, or
// the SIGUSR1 that `sbatch --signal=USR1@T` sends before the time limit; SIGINT from a
// terminal). While a StopSignals lives, those signals are only recorded: the training loop
// asks received() after each iteration, and the ranks agree to save and stop together.
// A second signal while the checkpoint is written is recorded again, and nothing is cut off.
//
// The signals are held pending (blocked) rather than handled where they land: `train`
// calls hold() first, before MPI starts its threads, so every thread inherits the mask and
// no system call of any thread is ever interrupted by a stop signal (a SIGUSR1 landing
// asynchronously in one rank of a pipeline, distributed-optimizer run corrupted its heap in
// ~1 run in 3, inside Open MPI's non-blocking collectives); received() takes the pending
// ones with sigtimedwait. A signal sent during start-up waits for the first iteration's end.
#include <csignal>
#include <string>

namespace trident {

class StopSignals {
 public:
  // Blocks SIGTERM, SIGINT and SIGUSR1 in the calling thread and the threads it starts later.
  static void hold();

  // Holds the signals in this thread too, and installs a recording handler for any thread
  // that was started before hold() (SA_RESTART: a write interrupted by a signal carries on);
  // `enabled` false installs none and unblocks them here: they keep their default action
  // (the process ends), also for one that came while they were held.
  // The handlers stay to the end of the process: a signal that comes after the stop (Slurm
  // signals again, an impatient operator) must not end it with 143 after a clean save.
  explicit StopSignals(bool enabled);
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  bool enabled() const { return enabled_; }
  // The number of the first stop signal received, 0 while none has come (takes the pending
  // ones).
  int received() const;

 private:
  bool enabled_;
};

// "SIGTERM", "SIGINT", "SIGUSR1"; "signal N" for any other.
std::string signal_name(int signal);

}  // namespace trident
