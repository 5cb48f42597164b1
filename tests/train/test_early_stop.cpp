// EarlyStop's decision after an iteration: a received signal, a time budget the next step
// would pass, a multiple of --exit-interval, or nothing; on one rank.
#include <gtest/gtest.h>

#include <csignal>
#include <thread>

#include "distributed/process_groups.h"
#include "engine/rank_context.h"
#include "train/early_stop.h"

namespace trident::train {
namespace {

struct OneRank {
  distributed::ProcessGrid grid{1, 1, 1};
  distributed::ProcessGroups groups = distributed::make_single_rank_groups();
  engine::RankContext rank{0, &grid, &groups, {"local"}};
};

TEST(EarlyStop, NothingEnabledCarriesOn) {
  OneRank one;
  TrainingConfig c;
  const StopSignals signals(false);
  const EarlyStop stop(c, signals, EarlyStop::Clock::now());
  for (long it = 1; it < 50; ++it) EXPECT_EQ(stop.after_iteration(it, 1.0, one.rank), "");
}

TEST(EarlyStop, ExitIntervalStopsAtItsFirstMultiple) {
  OneRank one;
  TrainingConfig c;
  c.exit_interval = 7;
  const StopSignals signals(false);
  const EarlyStop stop(c, signals, EarlyStop::Clock::now());
  EXPECT_EQ(stop.after_iteration(6, 0.1, one.rank), "");
  EXPECT_EQ(stop.after_iteration(7, 0.1, one.rank), "--exit-interval 7");
}

TEST(EarlyStop, DurationStopsBeforeTheStepThatWouldPassIt) {
  OneRank one;
  TrainingConfig c;
  c.exit_duration_in_mins = 1;  // 60 s
  const StopSignals signals(false);
  // Started 50 s ago: a 5 s step ends at 55 s (carry on), a 15 s step at 65 s (stop now).
  const EarlyStop stop(c, signals, EarlyStop::Clock::now() - std::chrono::seconds(50));
  EXPECT_EQ(stop.after_iteration(3, 5.0, one.rank), "");
  EXPECT_NE(stop.after_iteration(3, 15.0, one.rank).find("--exit-duration-in-mins 1"),
            std::string::npos);
}

TEST(EarlyStop, ASignalStopsAfterTheIterationItCameIn) {
  OneRank one;
  TrainingConfig c;
  c.exit_signal_handler = true;
  const StopSignals signals(true);
  const EarlyStop stop(c, signals, EarlyStop::Clock::now());
  EXPECT_EQ(stop.after_iteration(1, 0.1, one.rank), "");
  std::raise(SIGTERM);
  EXPECT_EQ(stop.after_iteration(2, 0.1, one.rank), "SIGTERM received");
}

}  // namespace
}  // namespace trident::train
