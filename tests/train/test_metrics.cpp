// The log lines' number format: Megatron's %E (capital E) in the loss of the iteration,
// validation and test lines alike; values worked by hand (exp(0) = 1, exp(2.5) = 12.18249...).
#include <gtest/gtest.h>

#include "train/metrics.h"

using namespace trident::train;

TEST(LogLines, TestAndValidationLossesUseMegatronsCapitalE) {
  EXPECT_EQ(format_test_line(0.0),
            " test loss at the end | lm loss value: 0.000000E+00 | lm loss PPL: 1.000000E+00 |");
  EXPECT_EQ(format_test_line(2.5),
            " test loss at the end | lm loss value: 2.500000E+00 | lm loss PPL: 1.218249E+01 |");
  ValidationStats v;
  v.iteration = 50;
  v.loss = 2.5;
  EXPECT_EQ(format_validation_line(v),
            " validation loss at iteration 50 | lm loss value: 2.500000E+00 | lm loss PPL: "
            "1.218249E+01 |");
}
