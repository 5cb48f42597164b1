// RoPE on packed q|k|v against the rotation by its definition (full and partial rotary
// dimension), the backward against central finite differences.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/kernels_test_util.h"
#include "kernels/rope.h"
#include "test_util.h"

namespace trident {
namespace {

using kernels_test::rope_ref;
using testing::numeric_gradient;
using testing::random_vector;
using testing::relative_error;
using testing::to_double;
using testing::weighted;

TEST(Rope, QkvForwardAndBackwardMatchReference) {
  const int batch = 2, seq = 5, heads = 2, d = 8;
  for (int r : {8, 4}) {  // --rotary-percent 1 and 0.5
    const kernels::RopeConfig c{d, r, 100.f};
    const long n = (long)batch * seq * 3 * heads * d;
    auto qkv = random_vector(n, 11), w = random_vector(n, 12);
    std::vector<float> y = qkv;
    kernels::rope_qkv(y.data(), batch, seq, heads, c, false);
    // The reference sees each token's q and k as 2 * heads heads, and v untouched.
    auto ref = [&](const std::vector<double>& x) {
      std::vector<double> qk, out = x;
      const long row = 3L * heads * d, qk_row = 2L * heads * d;
      for (int t = 0; t < batch * seq; ++t)
        qk.insert(qk.end(), x.begin() + t * row, x.begin() + t * row + qk_row);
      qk = rope_ref(qk, batch * seq, seq, 2 * heads, d, r, 100.0);
      for (int t = 0; t < batch * seq; ++t)
        std::copy(qk.begin() + t * qk_row, qk.begin() + (t + 1) * qk_row, out.begin() + t * row);
      return out;
    };
    EXPECT_LT(relative_error(y, ref(to_double(qkv))), 1e-5) << "rotary dim " << r;
    std::vector<float> dx = w;
    kernels::rope_qkv(dx.data(), batch, seq, heads, c, true);
    auto num = numeric_gradient([&](const std::vector<double>& v) { return weighted(ref(v), w); },
                                to_double(qkv));
    EXPECT_LT(relative_error(dx, num), 1e-4) << "rotary dim " << r;
  }
}

}  // namespace
}  // namespace trident
