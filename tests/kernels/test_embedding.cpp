// The embedding lookup over one vocabulary shard and its scatter-add backward.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/embedding.h"
#include "test_util.h"

namespace trident {
namespace {

using testing::random_vector;

TEST(Embedding, LookupOnlyInsideTheShardAndScatterAddBackward) {
  const int vocab_rows = 4, cols = 70, start = 4;  // shard holds ids 4..7
  auto table = random_vector(vocab_rows * cols, 17);
  std::vector<int> ids = {4, 9, 7, 4, 0};
  std::vector<float> out(ids.size() * cols);
  kernels::embedding_forward(ids.data(), (int)ids.size(), table.data(), start, vocab_rows, cols,
                             out.data());
  for (size_t i = 0; i < ids.size(); ++i)
    for (int c = 0; c < cols; ++c) {
      int local = ids[i] - start;
      float expect = (local >= 0 && local < vocab_rows) ? table[local * cols + c] : 0.f;
      EXPECT_EQ(out[i * cols + c], expect);
    }
  auto dout = random_vector((long)ids.size() * cols, 18);
  std::vector<float> dtable(vocab_rows * cols, 0.f);
  kernels::embedding_backward(ids.data(), (int)ids.size(), dout.data(), start, vocab_rows, cols,
                              dtable.data());
  for (int c = 0; c < cols; ++c) {
    EXPECT_FLOAT_EQ(dtable[0 * cols + c], dout[0 * cols + c] + dout[3 * cols + c]);
    EXPECT_FLOAT_EQ(dtable[3 * cols + c], dout[2 * cols + c]);
    EXPECT_EQ(dtable[1 * cols + c], 0.f);
  }
}

}  // namespace
}  // namespace trident
