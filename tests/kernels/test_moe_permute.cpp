// Dropless permute / unpermute against naive loops written here from the definition
// (expert-major rows, each expert's in ascending token order; each token's output the
// weighted sum of its k experts' rows, in double), their backwards against the same loops'
// adjoints, an expert that no token chose, the round trip back to the input, the chunk sort
// of expert parallelism against its naive order, choices dropped at capacity (no row, no
// output, zero gradients), experts padded to their capacity with zero rows, and a routing that
// names an expert outside [0, E) refused.
#include <gtest/gtest.h>

#include <numeric>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kernels/moe_permute.h"
#include "test_util.h"

namespace trident {
namespace {

using testing::random_vector;
using testing::relative_error;

// k distinct experts per token from [0, E), never `unused`.
std::vector<int> random_routing(int tokens, int experts, int k, int unused, std::uint64_t seed) {
  std::vector<int> idx;
  for (int t = 0; t < tokens; ++t) {
    std::vector<int> pool;
    for (int e = 0; e < experts; ++e)
      if (e != unused) pool.push_back(e);
    for (int i = (int)pool.size() - 1; i > 0; --i)
      std::swap(pool[i], pool[(int)(std::abs(normal_at(seed, t, i)) * 1000) % (i + 1)]);
    idx.insert(idx.end(), pool.begin(), pool.begin() + k);
  }
  return idx;
}

// The naive order: for each expert, for each token in order, its (token, slot) pairs.
std::vector<std::pair<int, int>> naive_order(const std::vector<int>& idx, int tokens, int k,
                                             int experts) {
  std::vector<std::pair<int, int>> order;
  for (int e = 0; e < experts; ++e)
    for (int t = 0; t < tokens; ++t)
      for (int j = 0; j < k; ++j)
        if (idx[(size_t)t * k + j] == e) order.push_back({t, j});
  return order;
}

TEST(MoePermute, ExpertMajorOrderAndOffsets) {
  const int tokens = 7, E = 6, k = 2, h = 5, unused = 3;
  const auto idx = random_routing(tokens, E, k, unused, 81);
  const kernels::MoePermutation p = kernels::make_moe_permutation(idx.data(), tokens, k, E);
  const auto order = naive_order(idx, tokens, k, E);
  ASSERT_EQ(p.rows(), (long)order.size());
  for (size_t r = 0; r < order.size(); ++r) {
    EXPECT_EQ(p.source[r], order[r].first);
    EXPECT_EQ(p.slot[r], order[r].second);
    EXPECT_EQ(p.row_of[(size_t)order[r].first * k + order[r].second], (long)r);
  }
  long start = 0;
  for (int e = 0; e < E; ++e) {
    long n = 0;
    for (int i : idx) n += i == e;
    EXPECT_EQ(p.offsets[e], start);
    EXPECT_EQ(p.rows_of(e), n);
    start += n;
  }
  EXPECT_EQ(p.rows_of(unused), 0);
  const auto x = random_vector((long)tokens * h, 82);
  std::vector<float> rows(p.rows() * h);
  kernels::moe_permute(p, x.data(), h, rows.data());
  for (size_t r = 0; r < order.size(); ++r)
    for (int c = 0; c < h; ++c) EXPECT_EQ(rows[r * h + c], x[(size_t)order[r].first * h + c]);
}

TEST(MoePermute, UnpermuteAndBackwardsMatchNaiveLoops) {
  const int tokens = 6, E = 5, k = 3, h = 4;
  const auto idx = random_routing(tokens, E, k, -1, 91);
  const kernels::MoePermutation p = kernels::make_moe_permutation(idx.data(), tokens, k, E);
  const auto order = naive_order(idx, tokens, k, E);
  const auto rows = random_vector(p.rows() * h, 92), weights = random_vector(tokens * k, 93);
  const auto dy = random_vector((long)tokens * h, 94);
  auto row_of = [&](int t, int j) {
    for (size_t r = 0; r < order.size(); ++r)
      if (order[r] == std::make_pair(t, j)) return (long)r;
    return -1L;
  };
  // y[t] = sum_j w[t, j] rows[row(t, j)]; d_rows[row(t, j)] = w[t, j] dy[t];
  // d_w[t, j] = <rows[row(t, j)], dy[t]>; permute's backward dx[t] = sum_j d_out[row(t, j)].
  std::vector<double> y_ref((size_t)tokens * h, 0), d_rows_ref(p.rows() * h), d_w_ref(tokens * k);
  std::vector<double> dx_ref((size_t)tokens * h, 0);
  for (int t = 0; t < tokens; ++t)
    for (int j = 0; j < k; ++j) {
      const long r = row_of(t, j);
      const double w = weights[(size_t)t * k + j];
      double dot = 0;
      for (int c = 0; c < h; ++c) {
        y_ref[(size_t)t * h + c] += w * rows[r * h + c];
        d_rows_ref[r * h + c] = w * dy[(size_t)t * h + c];
        dot += (double)rows[r * h + c] * dy[(size_t)t * h + c];
        dx_ref[(size_t)t * h + c] += rows[r * h + c];
      }
      d_w_ref[(size_t)t * k + j] = dot;
    }
  std::vector<float> y((size_t)tokens * h, 9.f), d_rows(p.rows() * h, 9.f), d_w(tokens * k, 9.f);
  kernels::moe_unpermute(p, rows.data(), weights.data(), h, y.data());
  EXPECT_LT(relative_error(y, y_ref), 1e-6);
  kernels::moe_unpermute_backward(p, rows.data(), weights.data(), dy.data(), h, d_rows.data(),
                                  d_w.data());
  EXPECT_LT(relative_error(d_rows, d_rows_ref), 1e-6);
  EXPECT_LT(relative_error(d_w, d_w_ref), 1e-6);
  std::vector<float> dx((size_t)tokens * h, 9.f);
  kernels::moe_permute_backward(p, rows.data(), h, dx.data());
  EXPECT_LT(relative_error(dx, dx_ref), 1e-6);
  // The weights in permuted order, and back.
  std::vector<float> permuted(p.rows()), back(tokens * k, 9.f);
  kernels::moe_permute_weights(p, weights.data(), permuted.data());
  for (size_t r = 0; r < order.size(); ++r)
    EXPECT_EQ(permuted[r], weights[(size_t)order[r].first * k + order[r].second]);
  kernels::moe_permute_weights_backward(p, permuted.data(), back.data());
  EXPECT_EQ(back, weights);
}

TEST(MoePermute, UnpermuteOfPermuteIsTheInput) {
  const int tokens = 9, E = 4, h = 6;
  const auto x = random_vector((long)tokens * h, 101);
  for (int k : {1, 2}) {
    const auto idx = random_routing(tokens, E, k, -1, 102 + k);
    const kernels::MoePermutation p = kernels::make_moe_permutation(idx.data(), tokens, k, E);
    std::vector<float> rows(p.rows() * h), y((size_t)tokens * h);
    kernels::moe_permute(p, x.data(), h, rows.data());
    // Unit weights with k = 1; weights 1/2 with k = 2 (x/2 + x/2 is x exactly).
    const std::vector<float> weights(tokens * k, 1.f / k);
    kernels::moe_unpermute(p, rows.data(), k == 1 ? nullptr : weights.data(), h, y.data());
    EXPECT_EQ(y, x) << "k = " << k;
  }
}

TEST(MoePermute, ChunksSortFromSourceMajorToExpertMajorAndBack) {
  // 3 sources x 2 local experts, with empty chunks; each row tagged with its (s, e, i).
  const int sources = 3, experts = 2, h = 3;
  const std::vector<long> counts = {2, 0, 1, 3, 0, 2};  // [s][e]
  std::vector<float> in;
  for (int s = 0; s < sources; ++s)
    for (int e = 0; e < experts; ++e)
      for (long i = 0; i < counts[s * experts + e]; ++i)
        for (int c = 0; c < h; ++c) in.push_back(100.f * s + 10.f * e + i + 0.1f * c);
  // The naive [e][s] order: for each expert, each source's rows in order.
  std::vector<float> expected;
  for (int e = 0; e < experts; ++e)
    for (int s = 0; s < sources; ++s)
      for (long i = 0; i < counts[s * experts + e]; ++i)
        for (int c = 0; c < h; ++c) expected.push_back(100.f * s + 10.f * e + i + 0.1f * c);
  std::vector<float> sorted(in.size(), -1.f), back(in.size(), -1.f);
  kernels::sort_chunks_by_expert(in.data(), counts.data(), sources, experts, h, sorted.data());
  EXPECT_EQ(sorted, expected);
  kernels::unsort_chunks_by_expert(sorted.data(), counts.data(), sources, experts, h, back.data());
  EXPECT_EQ(back, in);
}

TEST(MoePermute, DroppedChoicesHaveNoRowAndNoGradient) {
  const int tokens = 6, E = 3, k = 2, h = 3;
  const auto idx = random_routing(tokens, E, k, -1, 151);
  std::vector<unsigned char> keep(tokens * k, 1);
  keep[1] = keep[4] = keep[11] = 0;
  const kernels::MoePermutation p =
      kernels::make_moe_permutation(idx.data(), tokens, k, E, keep.data());
  EXPECT_EQ(p.rows(), tokens * k - 3);
  EXPECT_EQ(p.offsets[E], p.rows());
  const auto x = random_vector((long)tokens * h, 152), weights = random_vector(tokens * k, 153);
  const auto dy = random_vector((long)tokens * h, 154);
  std::vector<float> rows(p.rows() * h), y((size_t)tokens * h), dx((size_t)tokens * h);
  std::vector<float> d_rows(p.rows() * h), d_w(tokens * k, 9.f), d_w2(tokens * k, 9.f);
  kernels::moe_permute(p, x.data(), h, rows.data());
  kernels::moe_unpermute(p, rows.data(), weights.data(), h, y.data());
  kernels::moe_unpermute_backward(p, rows.data(), weights.data(), dy.data(), h, d_rows.data(),
                                  d_w.data());
  kernels::moe_permute_backward(p, d_rows.data(), h, dx.data());
  std::vector<float> permuted(p.rows());
  kernels::moe_permute_weights(p, weights.data(), permuted.data());
  kernels::moe_permute_weights_backward(p, permuted.data(), d_w2.data());
  // Through permute and unpermute a token's output is x times the sum of its kept weights,
  // and its input gradient dy times the same sum.
  std::vector<double> y_ref((size_t)tokens * h), dw_ref(tokens * k), dw2_ref(tokens * k);
  for (int t = 0; t < tokens; ++t) {
    double kept = 0;
    for (int j = 0; j < k; ++j) {
      const int i = t * k + j;
      kept += keep[i] ? weights[i] : 0.0;
      double dot = 0;
      for (int c = 0; c < h; ++c) dot += (double)x[(size_t)t * h + c] * dy[(size_t)t * h + c];
      dw_ref[i] = keep[i] ? dot : 0.0;
      dw2_ref[i] = keep[i] ? weights[i] : 0.0;
    }
    for (int c = 0; c < h; ++c) y_ref[(size_t)t * h + c] = kept * x[(size_t)t * h + c];
    std::vector<double> dx_ref(h);
    for (int c = 0; c < h; ++c) dx_ref[c] = kept * dy[(size_t)t * h + c];
    EXPECT_LT(
        relative_error(std::vector<float>(dx.begin() + t * h, dx.begin() + (t + 1) * h), dx_ref),
        1e-6);
  }
  EXPECT_LT(relative_error(y, y_ref), 1e-6);
  EXPECT_LT(relative_error(d_w, dw_ref), 1e-6);
  EXPECT_LT(relative_error(d_w2, dw2_ref), 1e-6);
}

TEST(MoePermute, PaddedExpertsHoldExactlyTheCapacityWithZeroPadRows) {
  const int tokens = 5, E = 3, k = 2, h = 2, capacity = 4;
  const auto idx = random_routing(tokens, E, k, -1, 161);
  std::vector<unsigned char> keep(tokens * k, 1);
  std::vector<long> kept_of(E, 0);
  for (int i = 0; i < tokens * k; ++i)  // keep at most `capacity` per expert, in token order
    keep[i] = kept_of[idx[i]]++ < capacity;
  const kernels::MoePermutation p =
      kernels::make_moe_permutation(idx.data(), tokens, k, E, keep.data(), capacity);
  ASSERT_EQ(p.rows(), (long)E * capacity);
  const auto x = random_vector((long)tokens * h, 162), weights = random_vector(tokens * k, 163);
  std::vector<float> rows(p.rows() * h, 7.f), permuted(p.rows(), 7.f);
  kernels::moe_permute(p, x.data(), h, rows.data());
  kernels::moe_permute_weights(p, weights.data(), permuted.data());
  // Expert e's block is [e C, (e + 1) C): its kept choices in token order, then zero rows.
  for (int e = 0; e < E; ++e) {
    EXPECT_EQ(p.offsets[e], (long)e * capacity);
    long r = (long)e * capacity;
    for (int i = 0; i < tokens * k; ++i) {
      if (idx[i] != e || !keep[i]) continue;
      EXPECT_EQ(p.row_of[i], r);
      EXPECT_EQ(rows[r * h], x[(size_t)(i / k) * h]);
      EXPECT_EQ(permuted[r], weights[i]);
      ++r;
    }
    for (; r < (long)(e + 1) * capacity; ++r) {
      EXPECT_EQ(p.source[r], -1);
      EXPECT_EQ(rows[r * h], 0.f);
      EXPECT_EQ(rows[r * h + 1], 0.f);
      EXPECT_EQ(permuted[r], 0.f);
    }
  }
  // An expert keeping more than the capacity cannot be padded to it.
  EXPECT_THROW(kernels::make_moe_permutation(idx.data(), tokens, k, E, nullptr, 1),
               std::logic_error);
}

TEST(MoePermute, ExpertOutsideTheRangeIsRefused) {
  const std::vector<int> idx = {0, 4, 1, 2};
  EXPECT_THROW(kernels::make_moe_permutation(idx.data(), 2, 2, 4), std::invalid_argument);
}

}  // namespace
}  // namespace trident
