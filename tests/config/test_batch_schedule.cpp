// The global batch schedule (batch-size ramp-up) against Megatron's own loop, written
// here independently.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "config/batch_schedule.h"

namespace trident {
namespace {

// The batch-size walk equals Megatron's loop (consumed += batch while consumed <= ramp-up),
// except that a length ending within the ramp-up stops at its last whole batch.
TEST(BatchSchedule, IterationsForMatchesMegatronsLoop) {
  long differ = 0;
  for (long start = 1; start <= 9; ++start)
    for (long inc = 1; inc <= 7; ++inc)
      for (long gbs = start; gbs <= 60; gbs += inc)
        for (long ramp : {0l, 1l, 5l, 13l, 100l, 999l, 4321l, 100000l})
          for (long samples : {0l, 7l, 1000l, 123457l}) {
            GlobalBatchSchedule s(gbs, {start, inc, ramp});
            long iterations = 0, consumed = 0;
            bool ended = false;
            while (consumed <= ramp && !ended) {
              ended = consumed + s.at(consumed) > samples;
              if (!ended) consumed += s.at(consumed), ++iterations;
            }
            if (!ended) iterations += std::max(0l, samples - consumed) / gbs;
            differ += s.iterations_for(samples) != iterations;
          }
  EXPECT_EQ(differ, 0);
}

}  // namespace
}  // namespace trident
