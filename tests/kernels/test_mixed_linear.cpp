// The mixed-precision Linear (bf16 and fp16) against a double-precision product of its
// rounded operands.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/kernels_test_util.h"
#include "kernels/low_precision.h"
#include "kernels/mixed_linear.h"
#include "test_util.h"

namespace trident {
namespace {

using kernels::Precision;
using kernels_test::product;
using kernels_test::rounded_bf16;
using testing::random_vector;

TEST(MixedLinear, Bf16AndFp16MatchTheProductOfTheirRoundedOperands) {
  const int rows = 24, in = 40, out = 56;
  auto x = random_vector(rows * in, 8), w = random_vector(out * in, 9, 0.1f);
  auto dy = random_vector(rows * out, 10, 1e-3f);
  // bf16 twice: the weight gradient accumulated in place (gemm_bf16, as the output layer) and
  // through the inner-product kernel's fresh product plus an add (as the layers).
  for (auto [p, fresh_weight_grad] :
       {std::pair{Precision::kBf16, false}, {Precision::kBf16, true}, {Precision::kFp16, false}}) {
    std::vector<std::uint16_t> w16(w.size()), act16(rows * 64), in16(rows * 64);
    std::vector<float> act32(rows * 64), in32(rows * 64), w32(w.size()), dw_fresh(w.size());
    kernels::LinearPrecision lp{p,
                                {act16.data(), in16.data(), act32.data(), in32.data(), w32.data()}};
    if (fresh_weight_grad) {
      lp.scratch.weight_grad32 = dw_fresh.data();
      lp.scratch.weight_grad32_floats = (long)dw_fresh.size();
    }
    std::vector<float> y(rows * out), dx(rows * in), dw(w.size(), 0.5f);
    auto round = [&](const std::vector<float>& v) {
      if (p == Precision::kBf16) return rounded_bf16(v);
      std::vector<float> r(v.size());
      kernels::round_through_fp16(v.data(), r.data(), (long)v.size());
      return r;
    };
    if (p == Precision::kBf16)
      kernels::to_bf16(w.data(), w16.data(), (long)w.size());
    else
      kernels::to_fp16(w.data(), w16.data(), (long)w.size());
    kernels::mixed_linear_forward(lp, x.data(), {w.data(), w16.data()}, y.data(), rows, in, out);
    kernels::mixed_linear_backward(lp, dy.data(), x.data(), {w.data(), w16.data()}, dx.data(),
                                   dw.data(), rows, in, out);
    auto xr = round(x), wr = round(w), dyr = round(dy);
    std::vector<float> half(w.size(), 0.5f);
    EXPECT_LT(testing::relative_error(y, product(false, true, rows, out, in, xr, wr, {}, false)),
              1e-5);
    EXPECT_LT(testing::relative_error(dx, product(false, false, rows, in, out, dyr, wr, {}, false)),
              1e-5);
    EXPECT_LT(testing::relative_error(dw, product(true, false, out, in, rows, dyr, xr, half, true)),
              1e-5)
        << fresh_weight_grad;
    if (fresh_weight_grad) {
      EXPECT_NE(dw_fresh, std::vector<float>(w.size()));  // the path ran
    }
    // ...and they are not the fp32 answer: the rounding happened.
    EXPECT_GT(testing::relative_error(y, product(false, true, rows, out, in, x, w, {}, false)),
              1e-5);
  }
}

}  // namespace
}  // namespace trident
