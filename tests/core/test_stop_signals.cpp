// StopSignals: while installed, a stop signal is held and recorded instead of ending the
// process, the first one is kept; hold() blocks the signals for the threads started after it;
// one not installed leaves received() at 0 and the signals unblocked (read back with
// pthread_sigmask).
#include <gtest/gtest.h>
#include <pthread.h>

#include <csignal>
#include <thread>

#include "core/stop_signals.h"

namespace trident {
namespace {

TEST(StopSignals, RecordTheFirstSignalAndKeepTheProcessAlive) {
  const StopSignals signals(true);
  EXPECT_EQ(signals.received(), 0);
  std::raise(SIGUSR1);
  EXPECT_EQ(signals.received(), SIGUSR1);
  std::raise(SIGTERM);  // a second one, as Slurm sends while the save runs
  std::raise(SIGINT);
  EXPECT_EQ(signals.received(), SIGUSR1);
}

bool blocked_here(int signal) {
  sigset_t mask;
  pthread_sigmask(SIG_BLOCK, nullptr, &mask);
  return sigismember(&mask, signal) == 1;
}

TEST(StopSignals, HeldSignalsAreBlockedInThreadsStartedLater) {
  StopSignals::hold();
  bool in_thread = false;
  std::thread([&] { in_thread = blocked_here(SIGTERM) && blocked_here(SIGUSR1); }).join();
  EXPECT_TRUE(in_thread);
}

TEST(StopSignals, NotEnabledReceivesNothingAndReleasesTheHeldSignals) {
  StopSignals::hold();
  const StopSignals signals(false);
  EXPECT_FALSE(signals.enabled());
  EXPECT_EQ(signals.received(), 0);
  EXPECT_FALSE(blocked_here(SIGTERM) || blocked_here(SIGINT) || blocked_here(SIGUSR1));
}

TEST(StopSignals, NamesTheSignals) {
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(signal_name(SIGHUP), "signal " + std::to_string(SIGHUP));
}

}  // namespace
}  // namespace trident
