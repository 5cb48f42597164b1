#include "core/stop_signals.h"

#include <atomic>

namespace trident {

namespace {

// A signal handler can reach nothing but a static object: this is the one piece of state
// that is not passed down. Lock-free atomics are async-signal-safe.
std::atomic<int> first_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);

void record_stop_signal(int signal) {
  int none = 0;
  first_stop_signal.compare_exchange_strong(none, signal);
}

}  // namespace

StopSignals::StopSignals(bool enabled) : enabled_(enabled) {
  if (!enabled_) return;
  first_stop_signal.store(0);
  struct sigaction action = {};
  action.sa_handler = record_stop_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGTERM, SIGINT, SIGUSR1}) sigaction(signal, &action, nullptr);
}

int StopSignals::received() const {
  return enabled_ ? first_stop_signal.load() : 0;
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return "signal " + std::to_string(signal);
  }
}

}  // namespace trident
