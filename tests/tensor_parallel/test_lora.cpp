// The LoRA branch of ColumnParallelLinear and RowParallelLinear (tensor_parallel/lora.h) on a
// frozen base (no weight gradient): at t = 1 against central finite differences of
// L = sum(y * g) (dL/dy = g), and at t = 1, 2, 4 (a thread per rank) against a float64
// reference written here with loops over the unsplit tensors: y = x W^T + s (x A^T) B^T,
// dx = dy W + s (dy B) A, dA = s (dy B)^T x, dB = s dy^T (x A^T). Adapter gradient buffers
// start at 0.25, so accumulation is checked too. Tolerance 1e-5 relative (fp32 sums of at
// most 16 products); finite differences 1e-3 (L is linear in each of x, A and B, so the
// difference is exact but for fp32 rounding of L, ~1e-7 |L| / eps with eps = 1e-2).
// With --lora-dropout the reference drops x elementwise by kernels::dropout_keeps of the
// unsplit x's element (sample, position in the sample, column): x_d = x m / (1 - p),
// y = x W^T + s (x_d A^T) B^T, dx = dy W + s m / (1 - p) (dy B) A, dA = s (dy B)^T x_d,
// dB = s dy^T (x_d A^T); with the mask split as the layouts split x, each rank must draw
// the unsplit layer's bits.
// bf16 runs' operands (x and dy in bf16): the branch against the reference of the rounded
// values within 1e-2 (it rounds s u and s B to bf16 for the products with dy).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/dropout.h"
#include "kernels/low_precision.h"
#include "tensor_parallel/layers.h"
#include "tensor_parallel/tensor_parallel_test_util.h"
#include "test_util.h"

namespace trident {
namespace {

using namespace tensor_parallel_test;
using testing::random_vector;
using testing::relative_error;
using testing::to_double;

constexpr int kRows = 8, kIn = 12, kOut = 16, kRank = 4;
constexpr float kScale = 0.75f;  // alpha / R
constexpr float kGradStart = 0.25f;

using Matrix = std::vector<double>;

// c[m, n] = a[m, k] b[k, n] with either operand read transposed.
Matrix product(const Matrix& a, const Matrix& b, int m, int k, int n, bool ta, bool tb) {
  Matrix c((size_t)m * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p)
        c[(size_t)i * n + j] += (ta ? a[(size_t)p * m + i] : a[(size_t)i * k + p]) *
                                (tb ? b[(size_t)j * k + p] : b[(size_t)p * n + j]);
  return c;
}

Matrix plus(Matrix a, const Matrix& b, double s = 1.0, double start = 0.0) {
  for (size_t i = 0; i < a.size(); ++i) a[i] = start + a[i] + s * b[i];
  return a;
}

Matrix times(Matrix a, const Matrix& m) {
  for (size_t i = 0; i < a.size(); ++i) a[i] *= m[i];
  return a;
}

// --lora-dropout in the tests: rows of kSeq positions from sample kFirstSample on.
constexpr int kSeq = 4;
constexpr long kFirstSample = 5;
constexpr float kDropout = 0.4f;
constexpr std::uint32_t kSite = 0x80000007u;
const kernels::DropoutConfig kDropoutConfig{0.f, 0.f, 0x5eedull, kDropout};
const kernels::DropoutBatch kTraining{&kDropoutConfig, kFirstSample, kSeq, 0};

// m / (1 - p) of every element of the unsplit x [kRows, kIn], from the one-element reference
// generator; all ones without dropout.
Matrix dropout_factors(bool dropout) {
  Matrix m((size_t)kRows * kIn, 1.0);
  if (!dropout) return m;
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kIn; ++c) {
      const kernels::DropoutStream s{kDropoutConfig.seed, kSite,
                                     (std::uint32_t)(kFirstSample + r / kSeq), kDropout};
      m[(size_t)r * kIn + c] = kernels::dropout_keeps(s, (std::uint64_t)(r % kSeq) * kIn + c)
                                   ? 1.0 / (1.0 - kDropout)
                                   : 0.0;
    }
  return m;
}

// The unsplit layer's forward and gradients in float64.
struct Reference {
  Matrix y, dx, da, db;
};
Reference reference(const std::vector<float>& x32, const std::vector<float>& w32,
                    const std::vector<float>& a32, const std::vector<float>& b32,
                    const std::vector<float>& g32, bool dropout = false) {
  const Matrix x = to_double(x32), w = to_double(w32), a = to_double(a32), b = to_double(b32),
               g = to_double(g32), m = dropout_factors(dropout), xd = times(x, m);
  const Matrix u = product(xd, a, kRows, kIn, kRank, false, true);    // x_d A^T
  const Matrix gb = product(g, b, kRows, kOut, kRank, false, false);  // dy B
  Reference r;
  r.y = plus(product(x, w, kRows, kIn, kOut, false, true),
             product(u, b, kRows, kRank, kOut, false, true), kScale);
  r.dx = plus(product(g, w, kRows, kOut, kIn, false, false),
              times(product(gb, a, kRows, kRank, kIn, false, false), m), kScale);
  r.da = plus(Matrix(a.size(), 0.0), product(gb, xd, kRank, kRows, kIn, true, false), kScale,
              kGradStart);
  r.db = plus(Matrix(b.size(), 0.0), product(g, u, kOut, kRows, kRank, true, false), kScale,
              kGradStart);
  return r;
}

struct Tensors {
  std::vector<float> x = random_vector(kRows * kIn, 11), w = random_vector(kOut * kIn, 12),
                     a = random_vector(kRank * kIn, 13), b = random_vector(kOut * kRank, 14),
                     g = random_vector(kRows * kOut, 15);
};

struct RankResult {
  std::vector<float> y, dx, da, db;
};

// The call of a branch with `dropout`: with dropout, in scratch buffers of its own (as the
// chunk's plan gives them, tensor_parallel::LoraScratch); without, none (the branch
// allocates).
struct Call {
  std::vector<float> u, du, x;
  tensor_parallel::LoraCall call;
  Call(const kernels::DropoutBatch& dropout, int in)
      : u((size_t)kRows * kRank), du(u.size()), x((size_t)kRows * in) {
    call.dropout = dropout;
    if (dropout.training()) call.scratch = {u.data(), du.data(), x.data()};
  }
};

// Rank r's column-parallel layer: W and B by rows, A replicated; y its columns, dx whole.
RankResult run_column(const Tensors& v, comm::Communicator& tp,
                      const kernels::DropoutBatch& dropout = {}) {
  const int t = tp.size(), r = tp.rank(), out_local = kOut / t;
  std::vector<float> w = row_block(v.w, kIn, r * out_local, out_local);
  std::vector<float> a = v.a, b = row_block(v.b, kRank, r * out_local, out_local);
  RankResult out{std::vector<float>((size_t)kRows * out_local),
                 std::vector<float>((size_t)kRows * kIn), std::vector<float>(a.size(), kGradStart),
                 std::vector<float>(b.size(), kGradStart)};
  tensor_parallel::ColumnParallelLinear layer{.weight = {w.data(), nullptr, (long)w.size()},
                                              .bias = {nullptr, nullptr, 0},
                                              .in = kIn,
                                              .out_local = out_local,
                                              .tp = &tp};
  layer.lora = {{a.data(), out.da.data(), (long)a.size()},
                {b.data(), out.db.data(), (long)b.size()},
                kRank,
                kScale,
                {kSite, 0, kIn}};
  const Call call(dropout, kIn);
  layer.forward(v.x.data(), out.y.data(), kRows, call.call);
  const std::vector<float> g = column_block(v.g, kRows, kOut, r * out_local, out_local);
  layer.backward(g.data(), v.x.data(), out.dx.data(), kRows, call.call);
  return out;
}

// Rank r's row-parallel layer: W, A and x by columns, B replicated; y whole (all-reduced).
RankResult run_row(const Tensors& v, comm::Communicator& tp,
                   const kernels::DropoutBatch& dropout = {}) {
  const int t = tp.size(), r = tp.rank(), in_local = kIn / t;
  std::vector<float> w = column_block(v.w, kOut, kIn, r * in_local, in_local);
  std::vector<float> a = column_block(v.a, kRank, kIn, r * in_local, in_local), b = v.b;
  const std::vector<float> x = column_block(v.x, kRows, kIn, r * in_local, in_local);
  RankResult out{
      std::vector<float>((size_t)kRows * kOut), std::vector<float>((size_t)kRows * in_local),
      std::vector<float>(a.size(), kGradStart), std::vector<float>(b.size(), kGradStart)};
  tensor_parallel::RowParallelLinear layer{.weight = {w.data(), nullptr, (long)w.size()},
                                           .bias = {nullptr, nullptr, 0},
                                           .in_local = in_local,
                                           .out = kOut,
                                           .tp = &tp};
  layer.lora = {{a.data(), out.da.data(), (long)a.size()},
                {b.data(), out.db.data(), (long)b.size()},
                kRank,
                kScale,
                {kSite, r * in_local, kIn}};
  const Call call(dropout, in_local);
  layer.forward(x.data(), out.y.data(), kRows, call.call);
  layer.backward(v.g.data(), x.data(), out.dx.data(), kRows, call.call);
  return out;
}

class LoraLinearTest : public ::testing::TestWithParam<int> {};

void check_column_parallel(int t, bool dropout) {
  const int out_local = kOut / t;
  const Tensors v;
  std::vector<RankResult> ranks(t);
  const kernels::DropoutBatch batch = dropout ? kTraining : kernels::DropoutBatch{};
  run_group(t, [&](comm::Communicator& tp) { ranks[tp.rank()] = run_column(v, tp, batch); });
  const Reference ref = reference(v.x, v.w, v.a, v.b, v.g, dropout);
  std::vector<std::vector<float>> y;
  for (const RankResult& r : ranks) y.push_back(r.y);
  EXPECT_LT(relative_error(join_columns(y, kRows), ref.y), 1e-5);
  for (int r = 0; r < t; ++r) {
    EXPECT_LT(relative_error(ranks[r].dx, ref.dx), 1e-5) << "rank " << r;
    EXPECT_LT(relative_error(ranks[r].da, ref.da), 1e-5) << "rank " << r << ": A is replicated";
    EXPECT_LT(relative_error(ranks[r].db, row_block(ref.db, kRank, r * out_local, out_local)), 1e-5)
        << "rank " << r;
  }
}

void check_row_parallel(int t, bool dropout) {
  const int in_local = kIn / t;
  const Tensors v;
  std::vector<RankResult> ranks(t);
  const kernels::DropoutBatch batch = dropout ? kTraining : kernels::DropoutBatch{};
  run_group(t, [&](comm::Communicator& tp) { ranks[tp.rank()] = run_row(v, tp, batch); });
  const Reference ref = reference(v.x, v.w, v.a, v.b, v.g, dropout);
  std::vector<std::vector<float>> dx;
  for (int r = 0; r < t; ++r) {
    EXPECT_LT(relative_error(ranks[r].y, ref.y), 1e-5) << "rank " << r;
    dx.push_back(ranks[r].dx);
    EXPECT_LT(relative_error(ranks[r].da, column_block(ref.da, kRank, kIn, r * in_local, in_local)),
              1e-5)
        << "rank " << r;
    EXPECT_LT(relative_error(ranks[r].db, ref.db), 1e-5) << "rank " << r << ": B is replicated";
  }
  EXPECT_LT(relative_error(join_columns(dx, kRows), ref.dx), 1e-5);
}

TEST_P(LoraLinearTest, ColumnParallelMatchesTheUnsplitLayer) {
  check_column_parallel(GetParam(), false);
}
TEST_P(LoraLinearTest, RowParallelMatchesTheUnsplitLayer) {
  check_row_parallel(GetParam(), false);
}
// --lora-dropout: the masked branch; row-parallel ranks hold columns of the unsplit mask.
TEST_P(LoraLinearTest, ColumnParallelWithDropoutMatchesTheMaskedUnsplitLayer) {
  check_column_parallel(GetParam(), true);
}
TEST_P(LoraLinearTest, RowParallelWithDropoutMatchesTheMaskedUnsplitLayer) {
  check_row_parallel(GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(TensorParallel, LoraLinearTest, ::testing::Values(1, 2, 4),
                         tensor_parallel_size);

// The mask drops some elements and keeps most at p = 0.4 (else the tests above would not
// tell dropout from none), and evaluation (no sample index) draws none.
TEST(LoraDropout, TheTestMaskDropsSomeAndKeepsSome) {
  const Matrix m = dropout_factors(true);
  const long dropped = std::count(m.begin(), m.end(), 0.0);
  EXPECT_GT(dropped, kRows * kIn / 5);
  EXPECT_LT(dropped, kRows * kIn * 3 / 5);
  kernels::DropoutBatch evaluation = kTraining;
  evaluation.first_sample = -1;
  EXPECT_FALSE(kernels::lora_dropout_on(evaluation));
  EXPECT_TRUE(kernels::lora_dropout_on(kTraining));
}

// bf16 runs hand the branch bf16 x and dy (as the base's products take them): with x and dy
// rounded to bf16, the branch alone (W = 0) against the float64 reference of the rounded
// values, with and without dropout. The branch rounds s u and s B to bf16 for its products
// with dy (2^-9 relative each): 1e-2 relative.
void check_bf16_operands(bool column, bool dropout) {
  const Tensors v;
  std::vector<kernels::bf16_t> x16(v.x.size()), g16(v.g.size());
  kernels::to_bf16(v.x.data(), x16.data(), (long)x16.size());
  kernels::to_bf16(v.g.data(), g16.data(), (long)g16.size());
  std::vector<float> x(v.x.size()), g(v.g.size());
  kernels::from_bf16(x16.data(), x.data(), (long)x.size());
  kernels::from_bf16(g16.data(), g.data(), (long)g.size());
  std::vector<float> a = v.a, b = v.b, da(a.size(), kGradStart), db(b.size(), kGradStart);
  std::vector<float> y((size_t)kRows * kOut, 0.f), dx((size_t)kRows * kIn, 0.f);
  const tensor_parallel::LoraBranch branch{{a.data(), da.data(), (long)a.size()},
                                           {b.data(), db.data(), (long)b.size()},
                                           kRank,
                                           kScale,
                                           {kSite, 0, kIn}};
  const Call call(dropout ? kTraining : kernels::DropoutBatch{}, kIn);
  comm::SingleRankCommunicator tp("tensor");
  branch.forward(x16.data(), y.data(), kRows, kIn, kOut, call.call);
  if (column)
    branch.backward_column(g16.data(), x16.data(), dx.data(), kRows, kIn, kOut, tp, call.call);
  else
    branch.backward_row(g16.data(), x16.data(), dx.data(), kRows, kIn, kOut, tp, call.call);
  const Reference ref = reference(x, std::vector<float>(v.w.size(), 0.f), a, b, g, dropout);
  const std::string what = std::string(column ? "column" : "row") + (dropout ? " dropout" : "");
  EXPECT_LT(relative_error(y, ref.y), 1e-2) << what;
  EXPECT_LT(relative_error(dx, ref.dx), 1e-2) << what;
  EXPECT_LT(relative_error(da, ref.da), 1e-2) << what;
  EXPECT_LT(relative_error(db, ref.db), 1e-2) << what;
}

TEST(LoraBranchBf16, BranchOfBf16OperandsMatchesTheFloat64Reference) {
  for (bool column : {true, false})
    for (bool dropout : {false, true}) check_bf16_operands(column, dropout);
}

// L(x, A, B) = sum(y * g) of the one-rank column-parallel layer, accumulated in double.
double column_loss(const Tensors& v) {
  comm::SingleRankCommunicator tp("tensor");
  std::vector<float> y((size_t)kRows * kOut), w = v.w, a = v.a, b = v.b;
  tensor_parallel::ColumnParallelLinear layer{.weight = {w.data(), nullptr, (long)w.size()},
                                              .bias = {nullptr, nullptr, 0},
                                              .in = kIn,
                                              .out_local = kOut,
                                              .tp = &tp};
  layer.lora = {
      {a.data(), nullptr, (long)a.size()}, {b.data(), nullptr, (long)b.size()}, kRank, kScale};
  layer.forward(v.x.data(), y.data(), kRows);
  double loss = 0;
  for (size_t i = 0; i < y.size(); ++i) loss += (double)y[i] * v.g[i];
  return loss;
}

// dL/d(element k of `which`) by central differences.
double difference(Tensors v, std::vector<float> Tensors::*which, size_t k) {
  constexpr float eps = 1e-2f;
  (v.*which)[k] += eps;
  const double up = column_loss(v);
  (v.*which)[k] -= 2 * eps;
  return (up - column_loss(v)) / (2 * eps);
}

TEST(LoraLinearFiniteDifferences, GradientsOfAandBandXMatch) {
  const Tensors v;
  comm::SingleRankCommunicator tp("tensor");
  const RankResult got = run_column(v, tp);
  auto check = [&](std::vector<float> Tensors::*which, const std::vector<float>& grad, float start,
                   const char* name) {
    for (size_t k = 0; k < grad.size(); k += 3) {
      const double want = difference(v, which, k);
      EXPECT_NEAR(grad[k] - start, want, 1e-3 * std::max(1.0, std::abs(want))) << name << k;
    }
  };
  check(&Tensors::a, got.da, kGradStart, "dA ");
  check(&Tensors::b, got.db, kGradStart, "dB ");
  check(&Tensors::x, got.dx, 0.f, "dx ");
}

}  // namespace
}  // namespace trident
