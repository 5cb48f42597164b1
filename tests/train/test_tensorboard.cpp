// TensorBoard's event files: CRC-32C against the published check value and RFC 3720's test vectors
// (the masked form TFRecord uses is checked by tests/reference/training_log_test.py with
// python3-crc32c).
#include <gtest/gtest.h>

#include <string>

#include "train/tensorboard.h"

using namespace trident;

TEST(Crc32c, MatchesPublishedCheckValues) {
  EXPECT_EQ(train::crc32c("123456789"), 0xE3069283u);            // the CRC catalogue's check value
  EXPECT_EQ(train::crc32c(std::string(32, '\0')), 0x8A9136AAu);  // RFC 3720 B.4: 32 zero bytes
  EXPECT_EQ(train::crc32c(std::string(32, '\xff')), 0x62A8AB43u);  // 32 bytes of 0xff
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back((char)i);
  EXPECT_EQ(train::crc32c(ascending), 0x46DD794Eu);  // 0x00 .. 0x1f
  EXPECT_EQ(train::crc32c(""), 0u);
}
