#pragma once
// SIGINT / SIGTERM as an orderly shutdown: the signal handler only writes a byte to a pipe
// (async-signal-safe, and whichever thread the kernel picks runs it: MPI's, OpenMP's or
// a worker's); a watcher thread reads it and calls the callback. SIGPIPE is ignored, as a
// client that closes its socket mid-answer must not end the server (the front end writes
// with MSG_NOSIGNAL; a library that does not must not end it either).
#include <functional>
#include <thread>

namespace trident::serve {

class ShutdownSignals {
 public:
  explicit ShutdownSignals(std::function<void(int signal)> on_signal);
  ~ShutdownSignals();  // restores the default actions and joins the watcher
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

 private:
  std::thread watcher_;
};

}  // namespace trident::serve
