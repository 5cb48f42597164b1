// The peak that MFU divides by, checked again when a log interval outran it.
#include <gtest/gtest.h>

#include <cmath>

#include "train/startup_report.h"

namespace trident::train {
namespace {

TEST(RecheckPeak, OnlyARateAboveThePeakMeasuresAgainAndTheHigherPeakIsKept) {
  int measured = 0;
  const auto measure_at = [&](double tflops) {
    return [&measured, tflops] {
      ++measured;
      return tflops;
    };
  };
  // At or below the peak (MFU <= 1), or no rate at all: the peak stands, nothing measured.
  EXPECT_EQ(recheck_peak_tflops(0.2, 0.19, measure_at(0.5)), 0.2);
  EXPECT_EQ(recheck_peak_tflops(0.2, 0.2, measure_at(0.5)), 0.2);
  EXPECT_EQ(recheck_peak_tflops(0.2, NAN, measure_at(0.5)), 0.2);
  EXPECT_EQ(measured, 0);
  // Above it: measured once more, the higher of the two kept (a second bad window cannot
  // lower it).
  EXPECT_EQ(recheck_peak_tflops(0.105, 0.15, measure_at(0.201)), 0.201);
  EXPECT_EQ(recheck_peak_tflops(0.105, 0.15, measure_at(0.09)), 0.105);
  EXPECT_EQ(measured, 2);
}

}  // namespace
}  // namespace trident::train
