// The code-point slice WiC's word is cut with, against Python's own str slicing (values
// written down from CPython 3.11 on the same string).
#include <gtest/gtest.h>

#include "evaluation/text_ops.h"

namespace trident::evaluation {
namespace {

TEST(PythonSlice, CountsCodePointsAndClampsAsPython) {
  const std::string s = "na\u00efve \u00bd caf\u00e9";  // 'naïve ½ café', 12 code points
  EXPECT_EQ(python_slice(s, 0, 5), "na\u00efve");
  EXPECT_EQ(python_slice(s, 6, 7), "\u00bd");
  EXPECT_EQ(python_slice(s, -4, 12), "caf\u00e9");
  EXPECT_EQ(python_slice(s, -100, 3), "na\u00ef");
  EXPECT_EQ(python_slice(s, 5, 2), "");
  EXPECT_EQ(python_slice(s, 8, 100), "caf\u00e9");
  EXPECT_EQ(python_slice("", 0, 3), "");
}

}  // namespace
}  // namespace trident::evaluation
