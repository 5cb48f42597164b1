// Q8_0 blocks against values worked by hand (ggml's formula: fp16 d = max|x| / 127, q =
// round(x / d) half away from zero).
#include <gtest/gtest.h>

#include <cstring>

#include "deploy/gguf_encode.h"

namespace trident::deploy {
namespace {

TEST(GgufEncode, Q8_0BlockIsFp16ScaleAndRoundedInt8) {
  // Powers of two throughout, so every product is exact: max |x| = 127 / 128 gives
  // d = 1 / 128 (fp16 0x2000) and x / d = 128 x.
  std::vector<float> x(32, 0.f);
  x[0] = 127.f / 128;    // q = 127
  x[1] = -63.5f / 128;   // -63.5: half away from zero, -64 (not -63 or even -64 by luck)
  x[2] = 0.375f / 128;   // 0.375: 0
  x[3] = 0.5f / 128;     // 0.5: 1 (half to even would give 0)
  x[4] = -126.5f / 128;  // -126.5: -127
  const std::string b = encode_tensor(x.data(), 32, GgmlType::kQ8_0);
  ASSERT_EQ(b.size(), 34u);
  std::uint16_t d;
  std::memcpy(&d, b.data(), 2);
  EXPECT_EQ(d, 0x2000);
  const std::vector<int> q = {127, -64, 0, 1, -127};
  for (size_t i = 0; i < q.size(); ++i) EXPECT_EQ((int)(std::int8_t)b[2 + i], q[i]) << i;
  const std::vector<float> zeros(32, 0.f);  // d = 0: every q 0, no division by zero
  EXPECT_EQ(encode_tensor(zeros.data(), 32, GgmlType::kQ8_0), std::string(34, '\0'));
  EXPECT_THROW(encode_tensor(zeros.data(), 31, GgmlType::kQ8_0), std::invalid_argument);
}

}  // namespace
}  // namespace trident::deploy
