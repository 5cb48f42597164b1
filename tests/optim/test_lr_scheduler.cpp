// The learning-rate schedule against Megatron's formulas (values worked out by hand): warmup,
// cosine, linear, constant, inverse-square-root and WSD with its four annealing curves.
#include <gtest/gtest.h>

#include <cmath>
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

TEST(LrSchedule, InverseSquareRootFromTheEndOfWarmup) {
  // max_lr x sqrt(16 / n) after a warm-up of 16, floored at min_lr, min_lr after the decay.
  LrSchedule s{1.0f, 0.1f, 16, 1000, DecayStyle::kInverseSquareRoot};
  EXPECT_FLOAT_EQ(s.at(8), 0.5f);  // warm-up
  EXPECT_FLOAT_EQ(s.at(16), 1.f);
  EXPECT_FLOAT_EQ(s.at(64), 0.5f);
  EXPECT_FLOAT_EQ(s.at(400), 0.2f);
  EXPECT_FLOAT_EQ(s.at(1000), (float)(4.0 / std::sqrt(1000.0)));
  EXPECT_FLOAT_EQ(s.at(1001), 0.1f);
  s.min_lr = 0.3f;
  EXPECT_FLOAT_EQ(s.at(400), 0.3f);  // 0.2 is below the floor
  // No warm-up: both counts are taken as at least 1.
  LrSchedule cold{1.0f, 0.f, 0, 100, DecayStyle::kInverseSquareRoot};
  EXPECT_FLOAT_EQ(cold.at(0), 1.f);
  EXPECT_FLOAT_EQ(cold.at(1), 1.f);
  EXPECT_FLOAT_EQ(cold.at(4), 0.5f);
}

TEST(LrSchedule, WsdHoldsThePlateauThenAnneals) {
  // Warm-up 10, decay ends at 110, the last 40 anneal: stable from 10 to 70.
  LrSchedule s{1.0f, 0.1f, 10, 110, DecayStyle::kWsd, 40, WsdDecayStyle::kLinear};
  EXPECT_FLOAT_EQ(s.at(5), 0.5f);
  for (long n : {11L, 40L, 70L}) EXPECT_FLOAT_EQ(s.at(n), 1.f) << n;
  struct Curve {
    WsdDecayStyle style;
    double at_half;  // the coefficient half way through the annealing
  };
  const Curve curves[] = {{WsdDecayStyle::kLinear, 0.5},
                          {WsdDecayStyle::kCosine, 0.5},
                          {WsdDecayStyle::kExponential, std::sqrt(2.0) - 1.0},  // 2 x 0.5^0.5 - 1
                          {WsdDecayStyle::kMinusSqrt, 1.0 - std::sqrt(0.5)}};
  for (const Curve& c : curves) {
    s.wsd_style = c.style;
    EXPECT_NEAR(s.at(90), 0.1 + 0.9 * c.at_half, 1e-7) << (int)c.style;
    EXPECT_NEAR(s.at(110), 0.1, 1e-7) << (int)c.style;  // every curve ends at the floor
    EXPECT_FLOAT_EQ(s.at(111), 0.1f) << (int)c.style;
  }
  s.wsd_style = WsdDecayStyle::kLinear;
  EXPECT_NEAR(s.at(80), 0.1 + 0.9 * 0.75, 1e-7);  // a quarter of the way
  s.wsd_style = WsdDecayStyle::kCosine;
  EXPECT_NEAR(s.at(80), 0.1 + 0.9 * 0.5 * (std::cos(M_PI / 4) + 1), 1e-7);
  // The whole decay annealing: the curve starts right after the warm-up... of 0.
  LrSchedule all{2.0f, 0.f, 0, 100, DecayStyle::kWsd, 100, WsdDecayStyle::kLinear};
  EXPECT_FLOAT_EQ(all.at(0), 2.f);
  EXPECT_FLOAT_EQ(all.at(25), 1.5f);
}

TEST(LrSchedule, StyleNames) {
  EXPECT_EQ(parse_decay_style("WSD"), DecayStyle::kWsd);
  EXPECT_EQ(parse_decay_style("inverse-square-root"), DecayStyle::kInverseSquareRoot);
  EXPECT_THROW(parse_decay_style("wsd"), std::invalid_argument);  // Megatron's spelling only
  EXPECT_EQ(parse_wsd_decay_style("minus_sqrt"), WsdDecayStyle::kMinusSqrt);
  EXPECT_EQ(parse_wsd_decay_style("exponential"), WsdDecayStyle::kExponential);
  EXPECT_THROW(parse_wsd_decay_style("minus-sqrt"), std::invalid_argument);
}

}  // namespace
}  // namespace trident::optim
