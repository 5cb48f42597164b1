// ColumnParallelLinear, RowParallelLinear and VocabParallelEmbedding at t = 1, 2 and 4 (a
// thread per rank, thread_group.h), with and without sequence parallelism: the ranks' outputs
// put together, and the weight, bias and input gradients, against a float64 reference
// written here with plain loops over the unsplit tensors. Gradient buffers start at 0.25, so
// the accumulation is checked too. Tolerance: fp32 sums of at most 16 products of N(0, 1)
// values, relative to max(1, max |reference|): 1e-5. Collective counts: Megatron's f and g
// (one all-reduce each way), or sequence parallelism's all-gather and reduce-scatter.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "tensor_parallel/layers.h"
#include "tensor_parallel/mappings.h"
#include "tensor_parallel/tensor_parallel_test_util.h"
#include "test_util.h"

namespace trident {
namespace {

using namespace tensor_parallel_test;
using testing::random_vector;
using testing::relative_error;
using testing::to_double;

constexpr double kTolerance = 1e-5;
constexpr float kGradStart = 0.25f;  // what the gradient buffers hold before backward

// y[rows, out] = x[rows, in] w[out, in]^T
std::vector<double> times_transposed(const std::vector<double>& x, const std::vector<double>& w,
                                     int rows, int in, int out) {
  std::vector<double> y((size_t)rows * out, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o)
      for (int i = 0; i < in; ++i)
        y[(size_t)r * out + o] += x[(size_t)r * in + i] * w[(size_t)o * in + i];
  return y;
}

// dx[rows, in] = dy[rows, out] w[out, in]
std::vector<double> times(const std::vector<double>& dy, const std::vector<double>& w, int rows,
                          int out, int in) {
  std::vector<double> dx((size_t)rows * in, 0.0);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o)
      for (int i = 0; i < in; ++i)
        dx[(size_t)r * in + i] += dy[(size_t)r * out + o] * w[(size_t)o * in + i];
  return dx;
}

// start + dy[rows, out]^T x[rows, in]: the weight gradient after accumulation.
std::vector<double> weight_grad(const std::vector<double>& dy, const std::vector<double>& x,
                                int rows, int out, int in) {
  std::vector<double> dw((size_t)out * in, kGradStart);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o)
      for (int i = 0; i < in; ++i)
        dw[(size_t)o * in + i] += dy[(size_t)r * out + o] * x[(size_t)r * in + i];
  return dw;
}

// start + the column sums of dy[rows, out]: the bias gradient after accumulation.
std::vector<double> bias_grad(const std::vector<double>& dy, int rows, int out) {
  std::vector<double> db(out, kGradStart);
  for (int r = 0; r < rows; ++r)
    for (int o = 0; o < out; ++o) db[o] += dy[(size_t)r * out + o];
  return db;
}

std::vector<double> add_bias(std::vector<double> y, const std::vector<double>& b) {
  for (size_t i = 0; i < y.size(); ++i) y[i] += b[i % b.size()];
  return y;
}

// The derivative of GeLU's tanh form 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
double gelu_grad(double x) {
  const double k = std::sqrt(2 / M_PI), u = std::tanh(k * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + u) + 0.5 * x * (1 - u * u) * k * (1 + 3 * 0.044715 * x * x);
}

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}

// A SwiGLU fc1 shard: rows [first, first + count) of the gate half (the first `half` rows of
// m) followed by the same rows of the up half.
template <typename T>
std::vector<T> gate_and_up(const std::vector<T>& m, int cols, int half, int first, int count) {
  std::vector<T> shard = row_block(m, cols, first, count);
  const std::vector<T> up = row_block(m, cols, half + first, count);
  shard.insert(shard.end(), up.begin(), up.end());
  return shard;
}

constexpr int kRows = 8, kIn = 12, kOut = 16;  // every size divides by t = 1, 2 and 4

class ColumnParallelLinearTest : public ::testing::TestWithParam<int> {};

// Rank r holds rows [r out / t, (r + 1) out / t) of the weight and the bias, sees all of x and
// writes its columns of y; backward all-reduces dx (f).
TEST_P(ColumnParallelLinearTest, ForwardAndBackwardMatchTheUnsplitLayer) {
  const int t = GetParam(), out_local = kOut / t;
  const auto x = random_vector(kRows * kIn, 1), w = random_vector(kOut * kIn, 2);
  const auto b = random_vector(kOut, 3), dy = random_vector(kRows * kOut, 4);
  std::vector<std::vector<float>> y(t), dx(t), dw(t), db(t);
  std::vector<comm::CollectiveCounters> after_forward(t), after_backward(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    std::vector<float> w_r = row_block(w, kIn, r * out_local, out_local);
    std::vector<float> b_r = row_block(b, 1, r * out_local, out_local);
    dw[r].assign(w_r.size(), kGradStart);
    db[r].assign(out_local, kGradStart);
    const tensor_parallel::ColumnParallelLinear layer{
        .weight = {w_r.data(), dw[r].data(), (long)w_r.size()},
        .bias = {b_r.data(), db[r].data(), out_local},
        .in = kIn,
        .out_local = out_local,
        .tp = &tp};
    y[r].resize((size_t)kRows * out_local);
    layer.forward(x.data(), y[r].data(), kRows);
    after_forward[r] = tp.counters();
    const std::vector<float> dy_r = column_block(dy, kRows, kOut, r * out_local, out_local);
    dx[r].resize((size_t)kRows * kIn);
    layer.backward(dy_r.data(), x.data(), dx[r].data(), kRows);
    after_backward[r] = tp.counters();
  });
  const auto xd = to_double(x), wd = to_double(w), dyd = to_double(dy);
  EXPECT_LT(relative_error(join_columns(y, kRows), times_transposed(xd, wd, kRows, kIn, kOut)),
            kTolerance);  // the bias is the caller's to add
  const auto dx_ref = times(dyd, wd, kRows, kOut, kIn);
  const auto dw_ref = weight_grad(dyd, xd, kRows, kOut, kIn);
  const auto db_ref = bias_grad(dyd, kRows, kOut);
  for (int r = 0; r < t; ++r) {
    EXPECT_LT(relative_error(dx[r], dx_ref), kTolerance) << "rank " << r;
    EXPECT_LT(relative_error(dw[r], row_block(dw_ref, kIn, r * out_local, out_local)), kTolerance)
        << "rank " << r;
    EXPECT_LT(relative_error(db[r], row_block(db_ref, 1, r * out_local, out_local)), kTolerance)
        << "rank " << r;
    if (t == 1) continue;  // the one-rank communicator counts nothing
    EXPECT_EQ(after_forward[r].total_calls(), 0) << "f is the identity in forward";
    EXPECT_EQ(after_backward[r].all_reduce.calls, 1);
    EXPECT_EQ(after_backward[r].all_reduce.bytes, (long)kRows * kIn * 4);
    EXPECT_EQ(after_backward[r].total_calls(), 1);
  }
}

// Sequence parallelism: rank r holds rows [r rows / t, (r + 1) rows / t) of x; they are
// all-gathered before the layer, and the layer's partial dx is reduce-scattered back to them.
TEST_P(ColumnParallelLinearTest, SequenceParallelGathersRowsAndReduceScattersTheirGradient) {
  const int t = GetParam(), out_local = kOut / t, rows_local = kRows / t;
  const auto x = random_vector(kRows * kIn, 5), w = random_vector(kOut * kIn, 6);
  const auto b = random_vector(kOut, 7), dy = random_vector(kRows * kOut, 8);
  std::vector<std::vector<float>> y(t), dx(t), dw(t), db(t);
  std::vector<comm::CollectiveCounters> after_forward(t), after_backward(t);
  std::vector<long> dx_block(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    std::vector<float> w_r = row_block(w, kIn, r * out_local, out_local);
    std::vector<float> b_r = row_block(b, 1, r * out_local, out_local);
    dw[r].assign(w_r.size(), kGradStart);
    db[r].assign(out_local, kGradStart);
    const tensor_parallel::ColumnParallelLinear layer{
        .weight = {w_r.data(), dw[r].data(), (long)w_r.size()},
        .bias = {b_r.data(), db[r].data(), out_local},
        .in = kIn,
        .out_local = out_local,
        .tp = &tp,
        .sequence_parallel = true};
    const std::vector<float> x_r = row_block(x, kIn, r * rows_local, rows_local);
    std::vector<float> x_full((size_t)kRows * kIn);
    tensor_parallel::gather_from_sequence_parallel_region(tp, x_r.data(), x_full.data(),
                                                          (long)rows_local * kIn);
    y[r].resize((size_t)kRows * out_local);
    layer.forward(x_full.data(), y[r].data(), kRows);
    after_forward[r] = tp.counters();
    const std::vector<float> dy_r = column_block(dy, kRows, kOut, r * out_local, out_local);
    std::vector<float> dx_full((size_t)kRows * kIn);
    layer.backward(dy_r.data(), x_full.data(), dx_full.data(), kRows);
    const float* mine = tensor_parallel::gather_from_sequence_parallel_region_backward(
        tp, dx_full.data(), (long)rows_local * kIn);
    dx_block[r] = mine - dx_full.data();
    dx[r].assign(mine, mine + (long)rows_local * kIn);
    after_backward[r] = tp.counters();
  });
  const auto xd = to_double(x), wd = to_double(w), dyd = to_double(dy);
  EXPECT_LT(relative_error(join_columns(y, kRows), times_transposed(xd, wd, kRows, kIn, kOut)),
            kTolerance);
  EXPECT_LT(relative_error(join_rows(dx), times(dyd, wd, kRows, kOut, kIn)), kTolerance);
  const auto dw_ref = weight_grad(dyd, xd, kRows, kOut, kIn);
  const auto db_ref = bias_grad(dyd, kRows, kOut);
  for (int r = 0; r < t; ++r) {
    EXPECT_EQ(dx_block[r], (long)r * rows_local * kIn) << "this rank's rows of the buffer";
    EXPECT_LT(relative_error(dw[r], row_block(dw_ref, kIn, r * out_local, out_local)), kTolerance)
        << "rank " << r;
    EXPECT_LT(relative_error(db[r], row_block(db_ref, 1, r * out_local, out_local)), kTolerance)
        << "rank " << r;
    if (t == 1) continue;
    EXPECT_EQ(after_forward[r].all_gather.calls, 1);
    EXPECT_EQ(after_forward[r].total_calls(), 1);
    EXPECT_EQ(after_backward[r].reduce_scatter.calls, 1) << "and no all-reduce of dx";
    EXPECT_EQ(after_backward[r].total_calls(), 2);
  }
}

// fc1 followed by GeLU: backward_through_gelu turns d(GeLU(y + b)) into d(y + b) in the pass
// that sums the bias gradient.
TEST_P(ColumnParallelLinearTest, BackwardThroughGeluMatchesTheUnsplitLayer) {
  const int t = GetParam(), out_local = kOut / t;
  const auto x = random_vector(kRows * kIn, 9), w = random_vector(kOut * kIn, 10);
  const auto b = random_vector(kOut, 11), d_act = random_vector(kRows * kOut, 12);
  std::vector<std::vector<float>> dx(t), dw(t), db(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    std::vector<float> w_r = row_block(w, kIn, r * out_local, out_local);
    std::vector<float> b_r = row_block(b, 1, r * out_local, out_local);
    dw[r].assign(w_r.size(), kGradStart);
    db[r].assign(out_local, kGradStart);
    const tensor_parallel::ColumnParallelLinear layer{
        .weight = {w_r.data(), dw[r].data(), (long)w_r.size()},
        .bias = {b_r.data(), db[r].data(), out_local},
        .in = kIn,
        .out_local = out_local,
        .tp = &tp};
    std::vector<float> pre((size_t)kRows * out_local);
    layer.forward(x.data(), pre.data(), kRows);
    for (size_t i = 0; i < pre.size(); ++i) pre[i] += b_r[i % out_local];
    std::vector<float> d_act_r = column_block(d_act, kRows, kOut, r * out_local, out_local);
    dx[r].resize((size_t)kRows * kIn);
    layer.backward_through_gelu(d_act_r.data(), pre.data(), x.data(), dx[r].data(), kRows);
  });
  const auto xd = to_double(x), wd = to_double(w);
  const auto pre = add_bias(times_transposed(xd, wd, kRows, kIn, kOut), to_double(b));
  std::vector<double> d_pre(pre.size());
  for (size_t i = 0; i < pre.size(); ++i) d_pre[i] = d_act[i] * gelu_grad(pre[i]);
  const auto dx_ref = times(d_pre, wd, kRows, kOut, kIn);
  const auto dw_ref = weight_grad(d_pre, xd, kRows, kOut, kIn);
  const auto db_ref = bias_grad(d_pre, kRows, kOut);
  for (int r = 0; r < t; ++r) {
    EXPECT_LT(relative_error(dx[r], dx_ref), kTolerance) << "rank " << r;
    EXPECT_LT(relative_error(dw[r], row_block(dw_ref, kIn, r * out_local, out_local)), kTolerance)
        << "rank " << r;
    EXPECT_LT(relative_error(db[r], row_block(db_ref, 1, r * out_local, out_local)), kTolerance)
        << "rank " << r;
  }
}

// fc1 followed by SwiGLU: the unsplit weight is [gate (kOut / 2 rows) | up (kOut / 2 rows)];
// rank r holds its block of the gate rows followed by its block of the up rows, so its
// output rows are [gate | up] of its columns of the activation.
TEST_P(ColumnParallelLinearTest, BackwardThroughSwigluMatchesTheUnsplitLayer) {
  const int t = GetParam(), half = kOut / 2, half_local = half / t, out_local = 2 * half_local;
  const auto x = random_vector(kRows * kIn, 13), w = random_vector(kOut * kIn, 14);
  const auto b = random_vector(kOut, 15), d_act = random_vector(kRows * half, 16);
  std::vector<std::vector<float>> dx(t), dw(t), db(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    std::vector<float> w_r = gate_and_up(w, kIn, half, r * half_local, half_local);
    std::vector<float> b_r = gate_and_up(b, 1, half, r * half_local, half_local);
    dw[r].assign(w_r.size(), kGradStart);
    db[r].assign(out_local, kGradStart);
    const tensor_parallel::ColumnParallelLinear layer{
        .weight = {w_r.data(), dw[r].data(), (long)w_r.size()},
        .bias = {b_r.data(), db[r].data(), out_local},
        .in = kIn,
        .out_local = out_local,
        .tp = &tp};
    std::vector<float> pre((size_t)kRows * out_local);
    layer.forward(x.data(), pre.data(), kRows);
    for (size_t i = 0; i < pre.size(); ++i) pre[i] += b_r[i % out_local];
    const std::vector<float> d_act_r = column_block(d_act, kRows, half, r * half_local, half_local);
    dx[r].resize((size_t)kRows * kIn);
    layer.backward_through_swiglu(d_act_r.data(), pre.data(), x.data(), dx[r].data(), kRows);
  });
  // act = silu(gate) * up over the unsplit layer; d(pre) = [d gate | d up].
  const auto xd = to_double(x), wd = to_double(w);
  const auto pre = add_bias(times_transposed(xd, wd, kRows, kIn, kOut), to_double(b));
  std::vector<double> d_pre(pre.size());
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < half; ++c) {
      const double g = pre[(size_t)r * kOut + c], u = pre[(size_t)r * kOut + half + c];
      const double s = sigmoid(g), d = d_act[(size_t)r * half + c];
      d_pre[(size_t)r * kOut + c] = d * u * s * (1 + g * (1 - s));
      d_pre[(size_t)r * kOut + half + c] = d * g * s;
    }
  const auto dx_ref = times(d_pre, wd, kRows, kOut, kIn);
  const auto dw_ref = weight_grad(d_pre, xd, kRows, kOut, kIn);
  const auto db_ref = bias_grad(d_pre, kRows, kOut);
  for (int r = 0; r < t; ++r) {
    EXPECT_LT(relative_error(dx[r], dx_ref), kTolerance) << "rank " << r;
    EXPECT_LT(relative_error(dw[r], gate_and_up(dw_ref, kIn, half, r * half_local, half_local)),
              kTolerance)
        << "rank " << r;
    EXPECT_LT(relative_error(db[r], gate_and_up(db_ref, 1, half, r * half_local, half_local)),
              kTolerance)
        << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(TensorParallelSizes, ColumnParallelLinearTest, ::testing::Values(1, 2, 4),
                         tensor_parallel_size);

class RowParallelLinearTest : public ::testing::TestWithParam<int> {};

// Rank r holds columns [r in / t, (r + 1) in / t) of the weight and of x; forward all-reduces
// the partial products (g); the bias is replicated and its gradient complete on every rank.
TEST_P(RowParallelLinearTest, ForwardAndBackwardMatchTheUnsplitLayer) {
  const int t = GetParam(), in_local = kIn / t;
  const auto x = random_vector(kRows * kIn, 21), w = random_vector(kOut * kIn, 22);
  const auto b = random_vector(kOut, 23), dy = random_vector(kRows * kOut, 24);
  std::vector<std::vector<float>> y(t), dx(t), dw(t), db(t);
  std::vector<comm::CollectiveCounters> after_forward(t), after_backward(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    std::vector<float> w_r = column_block(w, kOut, kIn, r * in_local, in_local), b_r = b;
    dw[r].assign(w_r.size(), kGradStart);
    db[r].assign(kOut, kGradStart);
    const tensor_parallel::RowParallelLinear layer{
        .weight = {w_r.data(), dw[r].data(), (long)w_r.size()},
        .bias = {b_r.data(), db[r].data(), kOut},
        .in_local = in_local,
        .out = kOut,
        .tp = &tp};
    const std::vector<float> x_r = column_block(x, kRows, kIn, r * in_local, in_local);
    y[r].resize((size_t)kRows * kOut);
    layer.forward(x_r.data(), y[r].data(), kRows);
    after_forward[r] = tp.counters();
    dx[r].resize((size_t)kRows * in_local);
    layer.backward(dy.data(), x_r.data(), dx[r].data(), kRows);
    after_backward[r] = tp.counters();
  });
  const auto xd = to_double(x), wd = to_double(w), dyd = to_double(dy);
  const auto y_ref = times_transposed(xd, wd, kRows, kIn, kOut);
  const auto dw_ref = weight_grad(dyd, xd, kRows, kOut, kIn);
  const auto db_ref = bias_grad(dyd, kRows, kOut);
  EXPECT_LT(relative_error(join_columns(dx, kRows), times(dyd, wd, kRows, kOut, kIn)), kTolerance);
  for (int r = 0; r < t; ++r) {
    EXPECT_LT(relative_error(y[r], y_ref), kTolerance) << "rank " << r;
    EXPECT_LT(relative_error(dw[r], column_block(dw_ref, kOut, kIn, r * in_local, in_local)),
              kTolerance)
        << "rank " << r;
    EXPECT_LT(relative_error(db[r], db_ref), kTolerance) << "rank " << r;
    if (t == 1) continue;
    EXPECT_EQ(after_forward[r].all_reduce.calls, 1);
    EXPECT_EQ(after_forward[r].all_reduce.bytes, (long)kRows * kOut * 4);
    EXPECT_EQ(after_backward[r].total_calls(), 1) << "g is the identity in backward";
  }
}

// Sequence parallelism: the partial products are reduce-scattered to the ranks' rows, and
// backward takes the all-gathered dy (so the bias gradient sums every row on every rank).
TEST_P(RowParallelLinearTest, SequenceParallelReduceScattersRowsAndGathersTheirGradient) {
  const int t = GetParam(), in_local = kIn / t, rows_local = kRows / t;
  const auto x = random_vector(kRows * kIn, 25), w = random_vector(kOut * kIn, 26);
  const auto b = random_vector(kOut, 27), dy = random_vector(kRows * kOut, 28);
  std::vector<std::vector<float>> y(t), dx(t), dw(t), db(t);
  std::vector<comm::CollectiveCounters> after_forward(t), after_backward(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    std::vector<float> w_r = column_block(w, kOut, kIn, r * in_local, in_local), b_r = b;
    dw[r].assign(w_r.size(), kGradStart);
    db[r].assign(kOut, kGradStart);
    const tensor_parallel::RowParallelLinear layer{
        .weight = {w_r.data(), dw[r].data(), (long)w_r.size()},
        .bias = {b_r.data(), db[r].data(), kOut},
        .in_local = in_local,
        .out = kOut,
        .tp = &tp,
        .sequence_parallel = true};
    const std::vector<float> x_r = column_block(x, kRows, kIn, r * in_local, in_local);
    std::vector<float> partial((size_t)kRows * kOut);
    layer.forward(x_r.data(), partial.data(), kRows);
    const float* mine = tensor_parallel::reduce_scatter_to_sequence_parallel_region(
        tp, partial.data(), (long)rows_local * kOut);
    y[r].assign(mine, mine + (long)rows_local * kOut);
    after_forward[r] = tp.counters();
    const std::vector<float> dy_r = row_block(dy, kOut, r * rows_local, rows_local);
    std::vector<float> dy_full((size_t)kRows * kOut);
    tensor_parallel::reduce_scatter_to_sequence_parallel_region_backward(
        tp, dy_r.data(), dy_full.data(), (long)rows_local * kOut);
    dx[r].resize((size_t)kRows * in_local);
    layer.backward(dy_full.data(), x_r.data(), dx[r].data(), kRows);
    after_backward[r] = tp.counters();
  });
  const auto xd = to_double(x), wd = to_double(w), dyd = to_double(dy);
  const auto dw_ref = weight_grad(dyd, xd, kRows, kOut, kIn);
  const auto db_ref = bias_grad(dyd, kRows, kOut);
  EXPECT_LT(relative_error(join_rows(y), times_transposed(xd, wd, kRows, kIn, kOut)), kTolerance);
  EXPECT_LT(relative_error(join_columns(dx, kRows), times(dyd, wd, kRows, kOut, kIn)), kTolerance);
  for (int r = 0; r < t; ++r) {
    EXPECT_LT(relative_error(dw[r], column_block(dw_ref, kOut, kIn, r * in_local, in_local)),
              kTolerance)
        << "rank " << r;
    EXPECT_LT(relative_error(db[r], db_ref), kTolerance) << "rank " << r;
    if (t == 1) continue;
    EXPECT_EQ(after_forward[r].reduce_scatter.calls, 1) << "and no all-reduce";
    EXPECT_EQ(after_forward[r].total_calls(), 1);
    EXPECT_EQ(after_backward[r].all_gather.calls, 1);
    EXPECT_EQ(after_backward[r].total_calls(), 2);
  }
}

INSTANTIATE_TEST_SUITE_P(TensorParallelSizes, RowParallelLinearTest, ::testing::Values(1, 2, 4),
                         tensor_parallel_size);

// The embedding: vocabulary kVocab split in row blocks, learned positions replicated.
constexpr int kVocab = 20, kHidden = 6, kBatch = 2, kSeq = 4, kPositions = 5;
// Ids of every rank's range at t = 4 (5 ids each), repeated within and across samples.
const std::vector<int> kIds = {0, 7, 19, 7, 12, 4, 19, 15};

// out[b, s] = word[id] + position[s], and the gradients: each row's dout added to its id's
// word row and to its position's row.
struct EmbeddingReference {
  std::vector<double> out, word_grad, position_grad;
};
EmbeddingReference embedding_reference(const std::vector<float>& word,
                                       const std::vector<float>& position,
                                       const std::vector<float>& dout) {
  EmbeddingReference e{std::vector<double>((size_t)kBatch * kSeq * kHidden),
                       std::vector<double>((size_t)kVocab * kHidden, kGradStart),
                       std::vector<double>((size_t)kPositions * kHidden, kGradStart)};
  for (int b = 0; b < kBatch; ++b)
    for (int s = 0; s < kSeq; ++s)
      for (int h = 0; h < kHidden; ++h) {
        const size_t row = (size_t)b * kSeq + s, id = kIds[row];
        e.out[row * kHidden + h] = (double)word[id * kHidden + h] + position[s * kHidden + h];
        e.word_grad[id * kHidden + h] += dout[row * kHidden + h];
        e.position_grad[s * kHidden + h] += dout[row * kHidden + h];
      }
  return e;
}

class VocabParallelEmbeddingTest : public ::testing::TestWithParam<int> {};

// Rank r looks up the ids in its range (zeros elsewhere) and g all-reduces the partial
// lookups; backward needs no collective: the word rows are this rank's, and the position
// gradient is complete from the full dout every rank holds.
TEST_P(VocabParallelEmbeddingTest, ForwardAndBackwardMatchTheUnsplitTable) {
  const int t = GetParam(), vocab_local = kVocab / t, rows = kBatch * kSeq;
  const auto word = random_vector(kVocab * kHidden, 31),
             position = random_vector(kPositions * kHidden, 32);
  const auto dout = random_vector(rows * kHidden, 33);
  std::vector<std::vector<float>> out(t), word_grad(t), position_grad(t);
  std::vector<comm::CollectiveCounters> after_forward(t), after_backward(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    std::vector<float> word_r = row_block(word, kHidden, r * vocab_local, vocab_local),
                       position_r = position;
    word_grad[r].assign(word_r.size(), kGradStart);
    position_grad[r].assign(position.size(), kGradStart);
    const tensor_parallel::VocabParallelEmbedding embedding{
        .word = {word_r.data(), word_grad[r].data(), (long)word_r.size()},
        .position = {position_r.data(), position_grad[r].data(), (long)position_r.size()},
        .vocab_start = r * vocab_local,
        .vocab_local = vocab_local,
        .hidden = kHidden,
        .tp = &tp};
    out[r].resize((size_t)rows * kHidden);
    embedding.forward(kIds.data(), kBatch, kSeq, out[r].data());
    after_forward[r] = tp.counters();
    embedding.backward(kIds.data(), kBatch, kSeq, dout.data());
    after_backward[r] = tp.counters();
  });
  const EmbeddingReference ref = embedding_reference(word, position, dout);
  for (int r = 0; r < t; ++r) {
    EXPECT_LT(relative_error(out[r], ref.out), kTolerance) << "rank " << r;
    EXPECT_LT(relative_error(word_grad[r],
                             row_block(ref.word_grad, kHidden, r * vocab_local, vocab_local)),
              kTolerance)
        << "rank " << r;
    EXPECT_LT(relative_error(position_grad[r], ref.position_grad), kTolerance) << "rank " << r;
    if (t == 1) continue;
    EXPECT_EQ(after_forward[r].all_reduce.calls, 1);
    EXPECT_EQ(after_forward[r].total_calls(), 1);
    EXPECT_EQ(after_backward[r].total_calls(), 1);
  }
}

// Sequence parallelism: the partial lookups are reduce-scattered (rank r keeps its rows, and
// adds their positions), and backward all-gathers dout from the ranks' rows.
TEST_P(VocabParallelEmbeddingTest, SequenceParallelKeepsTheRanksRows) {
  const int t = GetParam(), vocab_local = kVocab / t, rows = kBatch * kSeq, rows_local = rows / t;
  const auto word = random_vector(kVocab * kHidden, 34),
             position = random_vector(kPositions * kHidden, 35);
  const auto dout = random_vector(rows * kHidden, 36);
  std::vector<std::vector<float>> out(t), word_grad(t), position_grad(t);
  std::vector<comm::CollectiveCounters> after_forward(t), after_backward(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    std::vector<float> word_r = row_block(word, kHidden, r * vocab_local, vocab_local),
                       position_r = position;
    word_grad[r].assign(word_r.size(), kGradStart);
    position_grad[r].assign(position.size(), kGradStart);
    const tensor_parallel::VocabParallelEmbedding embedding{
        .word = {word_r.data(), word_grad[r].data(), (long)word_r.size()},
        .position = {position_r.data(), position_grad[r].data(), (long)position_r.size()},
        .vocab_start = r * vocab_local,
        .vocab_local = vocab_local,
        .hidden = kHidden,
        .tp = &tp,
        .sequence_parallel = true};
    std::vector<float> full((size_t)rows * kHidden);
    out[r].resize((size_t)rows_local * kHidden);
    embedding.forward(kIds.data(), kBatch, kSeq, out[r].data(), full.data());
    after_forward[r] = tp.counters();
    const std::vector<float> dout_r = row_block(dout, kHidden, r * rows_local, rows_local);
    embedding.backward(kIds.data(), kBatch, kSeq, dout_r.data(), full.data());
    after_backward[r] = tp.counters();
  });
  const EmbeddingReference ref = embedding_reference(word, position, dout);
  EXPECT_LT(relative_error(join_rows(out), ref.out), kTolerance);
  for (int r = 0; r < t; ++r) {
    EXPECT_LT(relative_error(word_grad[r],
                             row_block(ref.word_grad, kHidden, r * vocab_local, vocab_local)),
              kTolerance)
        << "rank " << r;
    EXPECT_LT(relative_error(position_grad[r], ref.position_grad), kTolerance) << "rank " << r;
    if (t == 1) continue;
    EXPECT_EQ(after_forward[r].reduce_scatter.calls, 1);
    EXPECT_EQ(after_forward[r].total_calls(), 1);
    EXPECT_EQ(after_backward[r].all_gather.calls, 1);
    EXPECT_EQ(after_backward[r].total_calls(), 2);
  }
}

INSTANTIATE_TEST_SUITE_P(TensorParallelSizes, VocabParallelEmbeddingTest,
                         ::testing::Values(1, 2, 4), tensor_parallel_size);

}  // namespace
}  // namespace trident
