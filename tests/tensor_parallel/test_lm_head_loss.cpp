// The tied output layer fused with the vocabulary-parallel cross-entropy at t = 1, 2 and 4 (a
// thread per rank, thread_group.h), in chunks of 3 rows (the last one ragged) and in one chunk
// of all rows (the un-fused path), with and without sequence parallelism: losses, d(input)
// and the word-embedding gradient against logits, softmax and their gradients written here in
// float64 over the unsplit vocabulary (37 tokens padded to 40). Tolerance 1e-5 relative to
// max(1, max |reference|). And the chunk height rule on worked examples.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "tensor_parallel/lm_head_loss.h"
#include "tensor_parallel/mappings.h"
#include "tensor_parallel/tensor_parallel_test_util.h"
#include "test_util.h"

namespace trident {
namespace {

using namespace tensor_parallel_test;
using testing::random_vector;
using testing::relative_error;

constexpr int kRows = 8, kHidden = 6, kVocab = 37, kPadded = 40;
constexpr float kScale = 0.25f, kGradStart = 0.5f;
const std::vector<int> kTargets = {3, 36, 0, 17, 29, 9, 36, 22};

struct Reference {
  std::vector<double> loss, dx, dw;  // dw: [kPadded, kHidden], the padding rows untouched
};

// logits = x W^T over the real tokens; G = kScale (softmax - onehot); dx = G W; dW += G^T x.
Reference reference(const std::vector<float>& x, const std::vector<float>& w) {
  Reference ref{std::vector<double>(kRows), std::vector<double>((size_t)kRows * kHidden, 0.0),
                std::vector<double>((size_t)kPadded * kHidden, kGradStart)};
  for (int r = 0; r < kRows; ++r) {
    std::vector<double> logits(kVocab, 0.0);
    for (int v = 0; v < kVocab; ++v)
      for (int h = 0; h < kHidden; ++h)
        logits[v] += (double)x[(size_t)r * kHidden + h] * w[(size_t)v * kHidden + h];
    const double max = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (double l : logits) sum += std::exp(l - max);
    ref.loss[r] = std::log(sum) + max - logits[kTargets[r]];
    for (int v = 0; v < kVocab; ++v) {
      const double g = kScale * (std::exp(logits[v] - max) / sum - (v == kTargets[r] ? 1 : 0));
      for (int h = 0; h < kHidden; ++h) {
        ref.dx[(size_t)r * kHidden + h] += g * w[(size_t)v * kHidden + h];
        ref.dw[(size_t)v * kHidden + h] += g * x[(size_t)r * kHidden + h];
      }
    }
  }
  return ref;
}

struct Case {
  int t, chunk_rows;
  bool sequence_parallel;
};

std::string name_of(const ::testing::TestParamInfo<Case>& info) {
  std::string name = "t";
  name += std::to_string(info.param.t);
  name += "_chunk";
  name += std::to_string(info.param.chunk_rows);
  if (info.param.sequence_parallel) name += "_sp";
  return name;
}

class LMHeadLossTest : public ::testing::TestWithParam<Case> {};

TEST_P(LMHeadLossTest, LossesAndGradientsMatchTheUnsplitHead) {
  const Case c = GetParam();
  const int t = c.t, vocab_local = kPadded / t, rows_local = kRows / t;
  const auto x = random_vector(kRows * kHidden, 71), w = random_vector(kPadded * kHidden, 72);
  std::vector<std::vector<float>> losses(t), dx(t), dw(t);
  std::vector<comm::CollectiveCounters> counters(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    std::vector<float> w_r = row_block(w, kHidden, r * vocab_local, vocab_local);
    dw[r].assign(w_r.size(), kGradStart);
    std::vector<float> logits((size_t)c.chunk_rows * vocab_local);
    const int start = r * vocab_local;
    const tensor_parallel::LMHeadLoss head{
        .output_layer = {.weight = {w_r.data(), dw[r].data(), (long)w_r.size()},
                         .bias = {nullptr, nullptr, 0},
                         .in = kHidden,
                         .out_local = vocab_local,
                         .tp = &tp},
        .cross_entropy = {start, vocab_local, std::clamp(kVocab - start, 0, vocab_local), &tp},
        .chunk_rows = c.chunk_rows,
        .logits = logits.data(),
        .sequence_parallel = c.sequence_parallel};
    std::vector<float> x_full = x, dx_full((size_t)kRows * kHidden);
    losses[r].resize(kRows);
    if (c.sequence_parallel) {
      const std::vector<float> x_r = row_block(x, kHidden, r * rows_local, rows_local);
      tensor_parallel::gather_from_sequence_parallel_region(tp, x_r.data(), x_full.data(),
                                                            (long)rows_local * kHidden);
      tp.reset_counters();
      dx[r].resize((size_t)rows_local * kHidden);
      head.forward(x_full.data(), kTargets.data(), kRows, losses[r].data(), kScale, dx_full.data(),
                   dx[r].data());
    } else {
      head.forward(x_full.data(), kTargets.data(), kRows, losses[r].data(), kScale, dx_full.data());
      dx[r] = dx_full;
    }
    counters[r] = tp.counters();
  });
  const Reference ref = reference(x, w);
  for (int r = 0; r < t; ++r) {
    EXPECT_LT(relative_error(losses[r], ref.loss), 1e-5) << "rank " << r;
    const std::vector<double> dx_ref =
        c.sequence_parallel ? row_block(ref.dx, kHidden, r * rows_local, rows_local) : ref.dx;
    EXPECT_LT(relative_error(dx[r], dx_ref), 1e-5) << "rank " << r;
    EXPECT_LT(relative_error(dw[r], row_block(ref.dw, kHidden, r * vocab_local, vocab_local)), 1e-5)
        << "rank " << r;
    if (t == 1) continue;
    // Three all-reduces of the cross-entropy per chunk; d(input) once, after the last chunk.
    const int chunks = (kRows + c.chunk_rows - 1) / c.chunk_rows;
    EXPECT_EQ(counters[r].all_reduce.calls, 3 * chunks + (c.sequence_parallel ? 0 : 1));
    EXPECT_EQ(counters[r].reduce_scatter.calls, c.sequence_parallel ? 1 : 0);
    EXPECT_EQ(counters[r].all_gather.calls, 0) << "the logits are never gathered";
  }
}

INSTANTIATE_TEST_SUITE_P(TensorParallelSizes, LMHeadLossTest,
                         ::testing::Values(Case{1, 3, false}, Case{1, kRows, false},
                                           Case{2, 3, false}, Case{2, kRows, false},
                                           Case{4, 3, false}, Case{4, kRows, false},
                                           Case{2, 3, true}, Case{4, 3, true}),
                         name_of);

// Chunks of at most ~128 MiB of fp32 logits but never under 512 rows, the tokens split into
// equal chunks rounded up to 64 rows, never more rows than tokens; and at least `hidden` rows
// where such a chunk is at most 2^26 floats (it then holds the weight gradient).
TEST(LMHeadLoss, ChunkRowsFollowTheRule) {
  // 2^25 / 50304 = 667 rows a chunk: one chunk of all 100 tokens.
  EXPECT_EQ(tensor_parallel::lm_head_chunk_rows(100, 50304, 768), 100);
  // gpt2-small, B4 T256: 2 chunks of 512 would be under 768 rows; 768 x 50304 < 2^26, so
  // 1024 / 768 = 1 chunk.
  EXPECT_EQ(tensor_parallel::lm_head_chunk_rows(1024, 50304, 768), 1024);
  // 4096 tokens: ceil(4096 / 667) = 7 chunks of 586 rows, under 768; 4096 / 768 = 5 chunks of
  // ceil(4096 / 5) = 820 -> 832 rows.
  EXPECT_EQ(tensor_parallel::lm_head_chunk_rows(4096, 50304, 768), 832);
  // gpt2-xl's 1600 x 50304 is over 2^26 floats: no floor, 7 chunks of 586 -> 640 rows.
  EXPECT_EQ(tensor_parallel::lm_head_chunk_rows(4096, 50304, 1600), 640);
  // A small vocabulary: one chunk.
  EXPECT_EQ(tensor_parallel::lm_head_chunk_rows(8192, 100, 64), 8192);
  // A huge vocabulary: 2^25 / 2^20 = 32 rows, raised to 512; 2 chunks of 500 -> 512 rows.
  EXPECT_EQ(tensor_parallel::lm_head_chunk_rows(1000, 1 << 20, 768), 512);
  // Llama 3's 128256 entries: 2^25 / 128256 = 261 rows, raised to 512; B4 T256 in 2 chunks
  // (2048 x 128256 is over 2^26).
  EXPECT_EQ(tensor_parallel::lm_head_chunk_rows(1024, 128256, 2048), 512);
}

}  // namespace
}  // namespace trident
