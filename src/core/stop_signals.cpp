#include "core/stop_signals.h"

#include <pthread.h>

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

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : {SIGTERM, SIGINT, SIGUSR1}) sigaddset(&set, signal);
  return set;
}

}  // namespace

void StopSignals::hold() {
  const sigset_t set = stop_signal_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

StopSignals::StopSignals(bool enabled) : enabled_(enabled) {
  const sigset_t set = stop_signal_set();
  if (!enabled_) {
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    return;
  }
  hold();
  first_stop_signal.store(0);
  struct sigaction action = {};
  action.sa_handler = record_stop_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGTERM, SIGINT, SIGUSR1}) sigaction(signal, &action, nullptr);
}

int StopSignals::received() const {
  if (!enabled_) return 0;
  const sigset_t set = stop_signal_set();
  const timespec now = {0, 0};
  for (int signal; (signal = sigtimedwait(&set, nullptr, &now)) > 0;) record_stop_signal(signal);
  return first_stop_signal.load();
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
