// The conjugate mappings at t = 1, 2 and 4 (a thread per rank, thread_group.h) against sums
// and copies written here in float64: f's backward and g's forward are all-reduces; the
// sequence-parallel gather (g-bar) and reduce-scatter (g-bar') move row blocks, and each
// one's backward is the adjoint of its forward: sum over ranks of <forward(x), y> equals
// sum over ranks of <x, backward(y)>. The bf16 gather moves bits unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "kernels/low_precision.h"
#include "tensor_parallel/mappings.h"
#include "tensor_parallel/tensor_parallel_test_util.h"
#include "test_util.h"

namespace trident {
namespace {

using namespace tensor_parallel_test;
using testing::random_vector;
using testing::relative_error;

constexpr int kRows = 8, kCols = 6;  // rows divide by t = 1, 2 and 4
constexpr long kSize = (long)kRows * kCols;

// Rank r's tensor: a different draw per rank.
std::vector<float> of_rank(int r, std::uint64_t seed) {
  return random_vector(kSize, seed + 100 * r);
}

// The sum over ranks of their tensors, in float64.
std::vector<double> sum_over_ranks(int t, std::uint64_t seed) {
  std::vector<double> sum(kSize, 0.0);
  for (int r = 0; r < t; ++r) {
    const std::vector<float> x = of_rank(r, seed);
    for (long i = 0; i < kSize; ++i) sum[i] += x[i];
  }
  return sum;
}

double dot(const float* a, const float* b, long n) {
  double s = 0;
  for (long i = 0; i < n; ++i) s += (double)a[i] * b[i];
  return s;
}

class MappingsTest : public ::testing::TestWithParam<int> {};

// f: identity forward, all-reduce backward; g: all-reduce forward, identity backward.
TEST_P(MappingsTest, FBackwardAndGForwardSumOverTheGroup) {
  const int t = GetParam();
  std::vector<std::vector<float>> f_grad(t), g_out(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    f_grad[r] = of_rank(r, 1);
    tensor_parallel::copy_to_region_backward(tp, f_grad[r].data(), kSize);
    g_out[r] = of_rank(r, 2);
    tensor_parallel::reduce_from_region_forward(tp, g_out[r].data(), kSize);
  });
  for (int r = 0; r < t; ++r) {
    EXPECT_LT(relative_error(f_grad[r], sum_over_ranks(t, 1)), 1e-6) << "rank " << r;
    EXPECT_LT(relative_error(g_out[r], sum_over_ranks(t, 2)), 1e-6) << "rank " << r;
    EXPECT_EQ(f_grad[r], f_grad[0]) << "every rank holds the same bits";
  }
}

// g-bar: every rank gets all row blocks in rank order; its backward reduce-scatters the
// full-size gradients into this rank's block, in place.
TEST_P(MappingsTest, SequenceParallelGatherAndItsBackward) {
  const int t = GetParam();
  const long local = kSize / t;
  const std::vector<float> x = random_vector(kSize, 3);  // the row blocks, put together
  std::vector<std::vector<float>> gathered(t), grad(t), inputs(t), grads(t);
  std::vector<long> block(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    inputs[r] = row_block(x, kCols, r * kRows / t, kRows / t);
    gathered[r].resize(kSize);
    tensor_parallel::gather_from_sequence_parallel_region(tp, inputs[r].data(), gathered[r].data(),
                                                          local);
    grads[r] = of_rank(r, 4);
    std::vector<float> full_grad = grads[r];
    const float* mine =
        tensor_parallel::gather_from_sequence_parallel_region_backward(tp, full_grad.data(), local);
    block[r] = mine - full_grad.data();
    grad[r].assign(mine, mine + local);
  });
  const std::vector<double> grad_sum = sum_over_ranks(t, 4);
  double forward_dot = 0, backward_dot = 0;
  for (int r = 0; r < t; ++r) {
    EXPECT_EQ(gathered[r], x) << "rank " << r;
    EXPECT_EQ(block[r], r * local) << "rank " << r;
    EXPECT_LT(relative_error(grad[r], row_block(grad_sum, kCols, r * kRows / t, kRows / t)), 1e-6)
        << "rank " << r;
    forward_dot += dot(gathered[r].data(), grads[r].data(), kSize);
    backward_dot += dot(inputs[r].data(), grad[r].data(), local);
  }
  EXPECT_NEAR(forward_dot, backward_dot, 1e-5 * (1 + std::abs(forward_dot)));
}

// g-bar': this rank's row block of the sum over ranks, reduced in place into that block;
// its backward all-gathers the ranks' gradient blocks.
TEST_P(MappingsTest, SequenceParallelReduceScatterAndItsBackward) {
  const int t = GetParam();
  const long local = kSize / t;
  const std::vector<float> dy = random_vector(kSize, 5);  // the gradient blocks, put together
  std::vector<std::vector<float>> reduced(t), full_grad(t), inputs(t);
  std::vector<long> block(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    inputs[r] = of_rank(r, 6);
    std::vector<float> partial = inputs[r];
    const float* mine =
        tensor_parallel::reduce_scatter_to_sequence_parallel_region(tp, partial.data(), local);
    block[r] = mine - partial.data();
    reduced[r].assign(mine, mine + local);
    const std::vector<float> dy_r = row_block(dy, kCols, r * kRows / t, kRows / t);
    full_grad[r].resize(kSize);
    tensor_parallel::reduce_scatter_to_sequence_parallel_region_backward(
        tp, dy_r.data(), full_grad[r].data(), local);
  });
  const std::vector<double> sum = sum_over_ranks(t, 6);
  double forward_dot = 0, backward_dot = 0;
  for (int r = 0; r < t; ++r) {
    EXPECT_EQ(block[r], r * local) << "rank " << r;
    EXPECT_LT(relative_error(reduced[r], row_block(sum, kCols, r * kRows / t, kRows / t)), 1e-6)
        << "rank " << r;
    EXPECT_EQ(full_grad[r], dy) << "rank " << r;
    forward_dot += dot(reduced[r].data(), dy.data() + r * local, local);
    backward_dot += dot(inputs[r].data(), full_grad[r].data(), kSize);
  }
  EXPECT_NEAR(forward_dot, backward_dot, 1e-5 * (1 + std::abs(forward_dot)));
}

// The gather of an activation stored as bf16 (two to a float) moves its bits; a block of odd
// length cannot be moved as floats and is refused.
TEST_P(MappingsTest, SequenceParallelGatherOfBf16Blocks) {
  const int t = GetParam();
  const long local = kSize / t;
  std::vector<kernels::bf16_t> all(kSize);
  const std::vector<float> x = random_vector(kSize, 7);
  kernels::to_bf16(x.data(), all.data(), kSize);
  std::vector<std::vector<kernels::bf16_t>> gathered(t);
  std::vector<int> refused(t, 0);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    const std::vector<kernels::bf16_t> mine(all.begin() + r * local, all.begin() + (r + 1) * local);
    gathered[r].resize(kSize);
    tensor_parallel::gather_from_sequence_parallel_region(
        tp, kernels::GemmOperand(mine.data()),
        kernels::GemmOperandBuffer{nullptr, gathered[r].data()}, local);
    try {
      tensor_parallel::gather_from_sequence_parallel_region(
          tp, kernels::GemmOperand(mine.data()),
          kernels::GemmOperandBuffer{nullptr, gathered[r].data()}, local - 1);
    } catch (const std::logic_error&) {
      refused[r] = 1;
    }
  });
  for (int r = 0; r < t; ++r) {
    EXPECT_EQ(gathered[r], all) << "rank " << r;
    EXPECT_EQ(refused[r], 1) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(TensorParallelSizes, MappingsTest, ::testing::Values(1, 2, 4),
                         tensor_parallel_size);

}  // namespace
}  // namespace trident
