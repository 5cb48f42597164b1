// The grouped expert GEMM against per-expert products written here as naive double loops:
// forward (overwriting and accumulating), the input gradient and the weight gradient
// (accumulated into what was there), with experts of no rows first, in the middle and last,
// whose weight gradients must stay exactly as they were. The bf16 products against the same
// loops on the bf16-rounded operands, with experts of more rows than one bf16 block and
// remainders of every power of two (the blocks must tile each expert's rows exactly).
#include <gtest/gtest.h>

#include <vector>

#include "kernels/grouped_gemm.h"
#include "test_util.h"

namespace trident {
namespace {

using testing::random_vector;
using testing::relative_error;

struct Experts {
  std::vector<long> offsets;
  std::vector<std::vector<float>> w;
  std::vector<const float*> w_ptrs;
  kernels::ExpertGroups groups;
};

Experts make_experts(const std::vector<long>& rows_per_expert, int in, int out, int seed) {
  Experts x;
  x.offsets = {0};
  for (long n : rows_per_expert) x.offsets.push_back(x.offsets.back() + n);
  for (size_t e = 0; e < rows_per_expert.size(); ++e)
    x.w.push_back(random_vector((long)in * out, seed + e));
  for (const auto& w : x.w) x.w_ptrs.push_back(w.data());
  x.groups = {x.offsets.data(), (int)rows_per_expert.size(), in, out};
  return x;
}

void expect_grouped_matches_per_expert(const std::vector<long>& rows_per_expert) {
  const int in = 6, out = 5;
  Experts ex = make_experts(rows_per_expert, in, out, 111);
  const long rows = ex.offsets.back();
  const auto x = random_vector(rows * in, 120), dy = random_vector(rows * out, 121);
  const auto y0 = random_vector(rows * out, 122), dx0 = random_vector(rows * in, 123);
  // The naive per-expert products in double.
  std::vector<double> y_ref(rows * out, 0), dx_ref(rows * in, 0);
  std::vector<std::vector<double>> dw_ref(ex.w.size());
  std::vector<std::vector<float>> dw;
  for (size_t e = 0; e < ex.w.size(); ++e) {
    dw.push_back(random_vector((long)in * out, 130 + e));  // gradients already there
    dw_ref[e].assign(dw[e].begin(), dw[e].end());
    for (long r = ex.offsets[e]; r < ex.offsets[e + 1]; ++r)
      for (int o = 0; o < out; ++o)
        for (int i = 0; i < in; ++i) {
          const double w = ex.w[e][(size_t)o * in + i];
          y_ref[r * out + o] += x[r * in + i] * w;
          dx_ref[r * in + i] += dy[r * out + o] * w;
          dw_ref[e][(size_t)o * in + i] += (double)dy[r * out + o] * x[r * in + i];
        }
  }
  std::vector<float> y(rows * out, 9.f);
  kernels::grouped_linear_forward(ex.groups, x.data(), ex.w_ptrs.data(), y.data());
  EXPECT_LT(relative_error(y, y_ref), 1e-5);
  std::vector<float> y_acc = y0;
  kernels::grouped_linear_forward(ex.groups, x.data(), ex.w_ptrs.data(), y_acc.data(), true);
  std::vector<double> y_acc_ref = y_ref;
  for (long i = 0; i < rows * out; ++i) y_acc_ref[i] += y0[i];
  EXPECT_LT(relative_error(y_acc, y_acc_ref), 1e-5);
  std::vector<float> dx(rows * in, 9.f), dx_acc = dx0;
  kernels::grouped_linear_backward_input(ex.groups, dy.data(), ex.w_ptrs.data(), dx.data());
  EXPECT_LT(relative_error(dx, dx_ref), 1e-5);
  kernels::grouped_linear_backward_input(ex.groups, dy.data(), ex.w_ptrs.data(), dx_acc.data(),
                                         true);
  for (long i = 0; i < rows * in; ++i) dx_ref[i] += dx0[i];
  EXPECT_LT(relative_error(dx_acc, dx_ref), 1e-5);
  const std::vector<std::vector<float>> dw_before = dw;
  std::vector<float*> dw_ptrs;
  for (auto& g : dw) dw_ptrs.push_back(g.data());
  kernels::grouped_linear_backward_weight(ex.groups, dy.data(), x.data(), dw_ptrs.data());
  for (size_t e = 0; e < dw.size(); ++e) {
    EXPECT_LT(relative_error(dw[e], dw_ref[e]), 1e-5) << "expert " << e;
    if (rows_per_expert[e] == 0) {
      EXPECT_EQ(dw[e], dw_before[e]) << "expert " << e;
    }
  }
}

TEST(GroupedGemm, MatchesPerExpertProductsWithEmptyExperts) {
  expect_grouped_matches_per_expert({3, 0, 4, 0, 2});
  expect_grouped_matches_per_expert({0, 7, 1, 0});
  expect_grouped_matches_per_expert({5});
  expect_grouped_matches_per_expert({0, 0, 0});  // no rows at all
}

// bf16 operands (rounded here), fp32 results: the naive products of the rounded values in
// double, within fp32 accumulation.
void expect_bf16_grouped_matches_per_expert(const std::vector<long>& rows_per_expert) {
  const int in = 24, out = 10;
  Experts ex = make_experts(rows_per_expert, in, out, 211);
  const long rows = ex.offsets.back();
  auto rounded = [](std::vector<float> v, std::vector<kernels::bf16_t>& low) {
    low.resize(v.size());
    kernels::to_bf16(v.data(), low.data(), (long)v.size());
    kernels::from_bf16(low.data(), v.data(), (long)v.size());
    return v;
  };
  std::vector<kernels::bf16_t> x16, dy16;
  const auto x = rounded(random_vector(rows * in, 220), x16);
  const auto dy = rounded(random_vector(rows * out, 221), dy16);
  std::vector<std::vector<kernels::bf16_t>> w16(ex.w.size());
  std::vector<const kernels::bf16_t*> w16_ptrs;
  for (size_t e = 0; e < ex.w.size(); ++e) {
    ex.w[e] = rounded(ex.w[e], w16[e]);
    w16_ptrs.push_back(w16[e].data());
  }
  const auto dx0 = random_vector(rows * in, 223);
  std::vector<double> y_ref(rows * out, 0), dx_ref(rows * in, 0);
  std::vector<std::vector<double>> dw_ref(ex.w.size());
  std::vector<std::vector<float>> dw;
  for (size_t e = 0; e < ex.w.size(); ++e) {
    dw.push_back(random_vector((long)in * out, 230 + e));
    dw_ref[e].assign(dw[e].begin(), dw[e].end());
    for (long r = ex.offsets[e]; r < ex.offsets[e + 1]; ++r)
      for (int o = 0; o < out; ++o)
        for (int i = 0; i < in; ++i) {
          const double w = ex.w[e][(size_t)o * in + i];
          y_ref[r * out + o] += x[r * in + i] * w;
          dx_ref[r * in + i] += dy[r * out + o] * w;
          dw_ref[e][(size_t)o * in + i] += (double)dy[r * out + o] * x[r * in + i];
        }
  }
  std::vector<float> y(rows * out, 9.f), dx(rows * in, 9.f), dx_acc = dx0;
  kernels::grouped_linear_forward(ex.groups, x16.data(), w16_ptrs.data(), y.data());
  EXPECT_LT(relative_error(y, y_ref), 1e-5);
  kernels::grouped_linear_backward_input(ex.groups, dy16.data(), w16_ptrs.data(), dx.data());
  EXPECT_LT(relative_error(dx, dx_ref), 1e-5);
  kernels::grouped_linear_backward_input(ex.groups, dy16.data(), w16_ptrs.data(), dx_acc.data(),
                                         true);
  for (long i = 0; i < rows * in; ++i) dx_ref[i] += dx0[i];
  EXPECT_LT(relative_error(dx_acc, dx_ref), 1e-5);
  std::vector<float*> dw_ptrs;
  for (auto& g : dw) dw_ptrs.push_back(g.data());
  kernels::grouped_linear_backward_weight(ex.groups, dy16.data(), x16.data(), dw_ptrs.data());
  for (size_t e = 0; e < dw.size(); ++e)
    EXPECT_LT(relative_error(dw[e], dw_ref[e]), 1e-5) << "expert " << e;
}

TEST(GroupedGemm, Bf16MatchesPerExpertProductsOfTheRoundedOperandsAcrossBlocks) {
  const long block = kernels::kBf16BlockRows;
  expect_bf16_grouped_matches_per_expert({3, 0, 4, 0, 2});
  expect_bf16_grouped_matches_per_expert({2 * block + block - 1, 0, block, 1, block + 37});
}

}  // namespace
}  // namespace trident
