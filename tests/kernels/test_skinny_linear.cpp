// The decode-step Linear for a few rows (fp32 and bf16, as stored and in panels) against a
// double-precision product.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/low_precision.h"
#include "kernels/skinny_linear.h"
#include "test_util.h"

namespace trident {
namespace {

// Both layouts: w as stored [out, in], and repacked into panels (odd `in` and an `out` that
// leaves a partial block exercise the padding).
TEST(SkinnyLinear, MatchesADoubleReferenceForEveryRowCount) {
  for (bool panels : {false, true})
    for (kernels::Precision p : {kernels::Precision::kFp32, kernels::Precision::kBf16})
      for (int in : {37, 64, 200})
        for (int rows = 1; rows <= kernels::kSkinnyMaxRows; ++rows) {
          if (!kernels::skinny_linear_available(p, rows))
            GTEST_SKIP() << "no AVX-512 or AVX2 kernel";
          const int out = 29;
          std::vector<float> x = trident::testing::random_vector((long)rows * in, 3 + rows);
          std::vector<float> w = trident::testing::random_vector((long)out * in, 7);
          std::vector<kernels::bf16_t> x16(x.size()), w16(w.size());
          if (p == kernels::Precision::kBf16) {  // the reference sees the rounded operands
            kernels::to_bf16(x.data(), x16.data(), (long)x.size());
            kernels::to_bf16(w.data(), w16.data(), (long)w.size());
            kernels::from_bf16(x16.data(), x.data(), (long)x.size());
            kernels::from_bf16(w16.data(), w.data(), (long)w.size());
          }
          std::vector<float> y((long)rows * out, NAN);
          const long packed = kernels::panel_elements(p, out, in);
          std::vector<float> w_panels(packed);
          std::vector<kernels::bf16_t> w16_panels(packed);
          if (p == kernels::Precision::kFp32 && panels) {
            kernels::pack_panels(w.data(), out, in, w_panels.data());
            kernels::panel_linear_forward(x.data(), w_panels.data(), y.data(), rows, in, out);
          } else if (p == kernels::Precision::kFp32) {
            kernels::skinny_linear_forward(x.data(), w.data(), y.data(), rows, in, out);
          } else if (panels) {
            kernels::pack_panels_bf16(w16.data(), out, in, w16_panels.data());
            kernels::panel_linear_forward_bf16(x16.data(), w16_panels.data(), y.data(), rows, in,
                                               out);
          } else {
            kernels::skinny_linear_forward_bf16(x16.data(), w16.data(), y.data(), rows, in, out);
          }
          double worst = 0;
          for (int r = 0; r < rows; ++r)
            for (int o = 0; o < out; ++o) {
              double want = 0;
              for (int i = 0; i < in; ++i)
                want += (double)x[(long)r * in + i] * w[(long)o * in + i];
              const double err = std::fabs(y[(long)r * out + o] - want) / std::sqrt((double)in);
              if (!(err <= worst)) worst = err;  // a NaN (an output never written) sticks
            }
          EXPECT_LT(worst, 1e-5) << kernels::precision_name(p) << " rows " << rows << " in " << in
                                 << (panels ? " panels" : "");
        }
}

}  // namespace
}  // namespace trident
