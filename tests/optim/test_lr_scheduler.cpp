// The learning-rate schedule against Megatron's formulas: warmup, cosine, linear, constant.
#include <gtest/gtest.h>

#include <stdexcept>

#include "optim/lr_scheduler.h"

namespace trident::optim {
namespace {

TEST(LrSchedule, WarmupThenCosineToFloor) {
  LrSchedule s{1.0f, 0.1f, 10, 110, DecayStyle::kCosine};
  EXPECT_FLOAT_EQ(s.at(0), 0.f);
  EXPECT_FLOAT_EQ(s.at(5), 0.5f);
  EXPECT_FLOAT_EQ(s.at(10), 1.f);
  EXPECT_NEAR(s.at(60), 0.1 + 0.9 * 0.5, 1e-6);  // half way: cos(pi/2) = 0
  EXPECT_NEAR(s.at(110), 0.1f, 1e-6);
  EXPECT_FLOAT_EQ(s.at(500), 0.1f);
}

TEST(LrSchedule, LinearAndConstant) {
  LrSchedule lin{2.0f, 0.0f, 0, 100, DecayStyle::kLinear};
  EXPECT_NEAR(lin.at(25), 1.5, 1e-6);
  LrSchedule con{2.0f, 0.0f, 4, 100, DecayStyle::kConstant};
  EXPECT_FLOAT_EQ(con.at(2), 1.f);
  EXPECT_FLOAT_EQ(con.at(50), 2.f);
  EXPECT_THROW(parse_decay_style("exponential"), std::invalid_argument);
}

}  // namespace
}  // namespace trident::optim
