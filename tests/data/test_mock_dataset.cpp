// Mock data: the same seed gives the same samples, and the samples have structure a model
// can learn.
#include <gtest/gtest.h>

#include <vector>

#include "data/mock_dataset.h"

namespace trident {
namespace {

TEST(MockData, DeterministicAndLearnable) {
  data::MockGPTDataset a(50257, 64, 7), b(50257, 64, 7), other(50257, 64, 8);
  std::vector<int> x(65), y(65), z(65);
  a.sample(12345, x.data());
  b.sample(12345, y.data());
  other.sample(12345, z.data());
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  // Inside a run the next token is the previous plus a constant stride (mod the alphabet).
  int predictable = 0;
  for (int i = 2; i < 65; ++i)
    if (x[i] != a.eod() && x[i - 1] != a.eod() && x[i - 2] != a.eod())
      predictable += ((x[i] - x[i - 1] - (x[i - 1] - x[i - 2])) % 1000 == 0);
  EXPECT_GT(predictable, 40);
}

}  // namespace
}  // namespace trident
