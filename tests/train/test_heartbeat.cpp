// The heartbeat against the clock: lines while a step runs past the period, the previous
// step's time in them, nothing once the step has ended or when turned off. The stream is read
// by this thread right after end(), which the heartbeat's mutex makes safe (run under
// ThreadSanitizer by scripts/sanitize.sh thread).
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include "train/heartbeat.h"

namespace trident::train {
namespace {

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(Heartbeat, SpeaksWhileAStepRunsPastThePeriod) {
  std::ostringstream log;
  Heartbeat heartbeat(log, 0.05);
  heartbeat.begin(7);
  sleep_ms(180);  // beats due at 50, 100 and 150 ms
  heartbeat.end(0.18);
  const std::string first = log.str();
  // A loaded machine may wake the thread late (a late beat is skipped once the step ended),
  // but the first beat at 50 ms of a 180 ms step comes.
  EXPECT_EQ(first.rfind("iteration 7 still running after 0.05 s\n", 0), 0u) << first;
  EXPECT_GE(count(first, "iteration 7 still running"), 1);
  EXPECT_LE(count(first, "iteration 7 still running"), 3);
  EXPECT_EQ(first.find("the last took"), std::string::npos);  // no step had finished

  heartbeat.begin(8);
  sleep_ms(120);
  heartbeat.end(0.12);
  const std::string second = log.str().substr(first.size());
  EXPECT_EQ(second.rfind("iteration 8 still running after 0.05 s (the last took 0.2 s)\n", 0), 0u)
      << second;

  const size_t before = log.str().size();
  heartbeat.begin(9);
  heartbeat.end(0.001);  // a short step: nothing
  sleep_ms(120);         // and nothing between steps
  EXPECT_EQ(log.str().size(), before) << log.str().substr(before);
}

TEST(Heartbeat, ZeroPeriodIsSilent) {
  std::ostringstream log;
  Heartbeat heartbeat(log, 0);
  heartbeat.begin(1);
  sleep_ms(30);
  heartbeat.end(0.03);
  EXPECT_EQ(log.str(), "");
}

TEST(Heartbeat, StopsWhenDestroyedInsideAStep) {
  // A step that throws leaves the heartbeat inside it; the destructor still ends the thread.
  std::ostringstream log;
  {
    Heartbeat heartbeat(log, 10);
    heartbeat.begin(3);
  }
  EXPECT_EQ(log.str(), "");
}

}  // namespace
}  // namespace trident::train
