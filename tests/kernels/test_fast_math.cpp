// fast_exp and fast_tanh against the standard library in double, over the float range.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "kernels/fast_math.h"

namespace trident {
namespace {

TEST(FastMath, ExpAndTanhWithinFloatRounding) {
  double worst_exp = 0, worst_tanh = 0;
  for (double x = -80; x <= 80; x += 0.0137) {
    worst_exp =
        std::max(worst_exp, std::abs(kernels::fast_exp((float)x) - std::exp((double)(float)x)) /
                                std::exp((double)(float)x));
    worst_tanh =
        std::max(worst_tanh, std::abs(kernels::fast_tanh((float)x) - std::tanh((double)(float)x)));
  }
  EXPECT_LT(worst_exp, 3e-7);
  EXPECT_LT(worst_tanh, 2e-7);
  EXPECT_EQ(kernels::fast_exp(-1e30f), kernels::fast_exp(-87.3f));  // clamped, never inf/nan
  EXPECT_TRUE(std::isfinite(kernels::fast_exp(1e30f)));
}

}  // namespace
}  // namespace trident
