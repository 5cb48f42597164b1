// The fp16 loss scaler against Megatron's dynamic schedule (hysteresis, halving, a floor,
// doubling after a clean window) and the constant scaler.
#include <gtest/gtest.h>

#include "optim/loss_scaler.h"

namespace trident::optim {
namespace {

TEST(LossScaler, FollowsMegatronsDynamicSchedule) {
  LossScaler s = LossScaler::dynamic(1024.f, 256.f, 3, 2);
  EXPECT_TRUE(s.update(true));  // first overflow: skipped, hysteresis absorbs it
  EXPECT_EQ(s.scale(), 1024.f);
  EXPECT_TRUE(s.update(true));  // second: halves
  EXPECT_EQ(s.scale(), 512.f);
  EXPECT_TRUE(s.update(true));  // hysteresis spent: halves again
  EXPECT_EQ(s.scale(), 256.f);
  EXPECT_TRUE(s.update(true));  // never below the minimum
  EXPECT_EQ(s.scale(), 256.f);
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 256.f);
  EXPECT_FALSE(s.update(false));  // third clean step in a row: doubles, hysteresis reset
  EXPECT_EQ(s.scale(), 512.f);
  EXPECT_TRUE(s.update(true));  // one overflow is absorbed again
  EXPECT_EQ(s.scale(), 512.f);
  EXPECT_EQ(s.state().skipped, 5);
  LossScaler fixed = LossScaler::constant(128.f);
  EXPECT_TRUE(fixed.update(true));
  EXPECT_EQ(fixed.scale(), 128.f);
}

}  // namespace
}  // namespace trident::optim
