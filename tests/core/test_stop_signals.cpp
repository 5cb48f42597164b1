// StopSignals: while installed, a stop signal is recorded instead of ending the process, the
// first one is kept, and one not installed leaves received() at 0.
#include <gtest/gtest.h>

#include <csignal>

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

TEST(StopSignals, NotEnabledReceivesNothing) {
  const StopSignals signals(false);
  EXPECT_FALSE(signals.enabled());
  EXPECT_EQ(signals.received(), 0);
}

TEST(StopSignals, NamesTheSignals) {
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(signal_name(SIGHUP), "signal " + std::to_string(SIGHUP));
}

}  // namespace
}  // namespace trident
