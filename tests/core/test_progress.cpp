// Durations, the ETA and the progress line, against values worked out by hand.
#include <gtest/gtest.h>

#include "core/progress.h"

namespace trident {
namespace {

TEST(FormatDuration, PicksTheUnitsAPersonReads) {
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(7.4), "7s");
  EXPECT_EQ(format_duration(59.4), "59s");
  EXPECT_EQ(format_duration(59.6), "1m00s");  // rounds to the minute form
  EXPECT_EQ(format_duration(83), "1m23s");    // 60 + 23
  EXPECT_EQ(format_duration(3599), "59m59s");
  EXPECT_EQ(format_duration(2 * 3600 + 5 * 60 + 29), "2h05m");  // the 29 s round down
  EXPECT_EQ(format_duration(2 * 3600 + 5 * 60 + 31), "2h06m");
  EXPECT_EQ(format_duration(3 * 86400 + 4 * 3600 + 100), "3d04h");
  EXPECT_EQ(format_duration(-5), "0s");  // a clock that stepped back shows nothing negative
}

TEST(RecentIterations, EtaIsTheWindowMeanTimesWhatIsLeft) {
  RecentIterations recent(3);
  EXPECT_EQ(recent.eta_seconds(10), 0.0);
  recent.add(4.0);  // a slow first iteration (allocations)
  EXPECT_DOUBLE_EQ(recent.eta_seconds(9), 36.0);
  recent.add(1.0);
  recent.add(1.0);
  EXPECT_DOUBLE_EQ(recent.mean_seconds(), 2.0);  // (4 + 1 + 1) / 3
  recent.add(1.0);                               // the first drops out of the window
  EXPECT_DOUBLE_EQ(recent.mean_seconds(), 1.0);
  EXPECT_DOUBLE_EQ(recent.eta_seconds(6), 6.0);
  EXPECT_DOUBLE_EQ(recent.eta_seconds(0), 0.0);
}

TEST(FormatProgress, ExtrapolatesTheMeanSoFar) {
  // 3 of 10 in 6 s: 2 s each, 7 left -> 14 s.
  EXPECT_EQ(format_progress("validation", 3, 10, "batches", 6.0),
            "validation: 3/10 batches, 6s, about 14s left");
  EXPECT_EQ(format_progress("eval", 10, 10, "requests", 75.0), "eval: 10/10 requests, 1m15s");
}

TEST(ProgressTicker, ReportsOncePerPeriodWhileWorkRemains) {
  ProgressTicker ticker(2.0);
  EXPECT_LT(ticker.due_at(1, 10, 1.9), 0);    // not yet 2 s
  EXPECT_EQ(ticker.due_at(2, 10, 2.5), 2.5);  // due: the next at 4.5
  EXPECT_LT(ticker.due_at(3, 10, 4.4), 0);
  EXPECT_EQ(ticker.due_at(4, 10, 9.0), 9.0);  // late: the next a period after it, at 11
  EXPECT_LT(ticker.due_at(5, 10, 10.9), 0);
  EXPECT_LT(ticker.due_at(10, 10, 30.0), 0);  // finished: nothing to report
}

}  // namespace
}  // namespace trident
