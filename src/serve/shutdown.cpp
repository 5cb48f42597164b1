#include "serve/shutdown.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <stdexcept>

namespace trident::serve {

namespace {

int pipe_fds[2] = {-1, -1};

void on_signal(int sig) {
  const unsigned char b = (unsigned char)sig;
  [[maybe_unused]] ssize_t n = ::write(pipe_fds[1], &b, 1);
}

void set_action(int sig, void (*handler)(int)) {
  struct sigaction sa = {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(sig, &sa, nullptr);
}

}  // namespace

ShutdownSignals::ShutdownSignals(std::function<void(int)> callback) {
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  set_action(SIGPIPE, SIG_IGN);
  set_action(SIGINT, on_signal);
  set_action(SIGTERM, on_signal);
  watcher_ = std::thread([callback] {
    unsigned char b = 0;
    // Byte 0 is the destructor's "stop watching"; any other is a signal number.
    while (::read(pipe_fds[0], &b, 1) == 1 && b != 0) callback(b);
  });
}

ShutdownSignals::~ShutdownSignals() {
  set_action(SIGINT, SIG_DFL);
  set_action(SIGTERM, SIG_DFL);
  const unsigned char stop = 0;
  [[maybe_unused]] ssize_t n = ::write(pipe_fds[1], &stop, 1);
  watcher_.join();
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

}  // namespace trident::serve
