// Vocabulary-parallel cross-entropy at t = 1, 2 and 4 (a thread per rank, thread_group.h):
// each rank holds a column block of the logits, the last one ending in padding columns (37
// tokens padded to 40) that hold huge values the loss must ignore. The losses and the ranks'
// gradient blocks put together against the full softmax in float64 written here; the bf16
// gradient within bf16's rounding (8 significant bits) of it. Three all-reduces of one float
// per row, and the logits are never gathered.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "kernels/low_precision.h"
#include "tensor_parallel/cross_entropy.h"
#include "tensor_parallel/tensor_parallel_test_util.h"
#include "test_util.h"

namespace trident {
namespace {

using namespace tensor_parallel_test;
using testing::random_vector;
using testing::relative_error;

constexpr int kRows = 5, kVocab = 37, kPadded = 40;
constexpr float kScale = 0.5f;                          // grad_scale
const std::vector<int> kTargets = {0, 36, 12, 25, 19};  // in every rank's range at t = 4

// Logits [kRows, kPadded] around 0 (scale 3), padding columns 1e4: they would dominate the
// softmax if they were read.
std::vector<float> padded_logits(std::uint64_t seed) {
  std::vector<float> logits = random_vector(kRows * kPadded, seed, 3.f);
  for (int r = 0; r < kRows; ++r)
    for (int c = kVocab; c < kPadded; ++c) logits[(size_t)r * kPadded + c] = 1e4f;
  return logits;
}

// loss[r] = log sum_c exp(logits[r, c]) - logits[r, target] over the kVocab real columns;
// grad = kScale * (softmax - onehot(target)), 0 on the padding.
struct Reference {
  std::vector<double> loss, grad;
};
Reference reference(const std::vector<float>& logits) {
  Reference ref{std::vector<double>(kRows), std::vector<double>((size_t)kRows * kPadded, 0.0)};
  for (int r = 0; r < kRows; ++r) {
    const float* row = logits.data() + (size_t)r * kPadded;
    double max = -1e300, sum = 0;
    for (int c = 0; c < kVocab; ++c) max = std::max(max, (double)row[c]);
    for (int c = 0; c < kVocab; ++c) sum += std::exp(row[c] - max);
    ref.loss[r] = std::log(sum) + max - row[kTargets[r]];
    for (int c = 0; c < kVocab; ++c)
      ref.grad[(size_t)r * kPadded + c] =
          kScale * (std::exp(row[c] - max) / sum - (c == kTargets[r] ? 1.0 : 0.0));
  }
  return ref;
}

tensor_parallel::VocabParallelCrossEntropy shard_of(comm::Communicator& tp) {
  const int vocab_local = kPadded / tp.size(), start = tp.rank() * vocab_local;
  return {start, vocab_local, std::clamp(kVocab - start, 0, vocab_local), &tp};
}

class VocabParallelCrossEntropyTest : public ::testing::TestWithParam<int> {};

TEST_P(VocabParallelCrossEntropyTest, LossesAndGradientsMatchTheFullSoftmax) {
  const int t = GetParam(), vocab_local = kPadded / t;
  const std::vector<float> logits = padded_logits(41);
  std::vector<std::vector<float>> losses(t), no_grad_losses(t), grads(t);
  std::vector<comm::CollectiveCounters> counters(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    const tensor_parallel::VocabParallelCrossEntropy ce = shard_of(tp);
    grads[r] = column_block(logits, kRows, kPadded, r * vocab_local, vocab_local);
    losses[r].resize(kRows);
    ce.forward(grads[r].data(), kTargets.data(), kRows, losses[r].data(), kScale);
    counters[r] = tp.counters();
    // Without a gradient (evaluation): the same losses.
    std::vector<float> consumed =
        column_block(logits, kRows, kPadded, r * vocab_local, vocab_local);
    no_grad_losses[r].resize(kRows);
    ce.forward(consumed.data(), kTargets.data(), kRows, no_grad_losses[r].data(), 0.f);
  });
  const Reference ref = reference(logits);
  EXPECT_LT(relative_error(join_columns(grads, kRows), ref.grad), 1e-6);
  for (int r = 0; r < t; ++r) {
    EXPECT_LT(relative_error(losses[r], ref.loss), 1e-5) << "rank " << r;
    EXPECT_EQ(no_grad_losses[r], losses[r]) << "rank " << r;
    if (t == 1) continue;
    EXPECT_EQ(counters[r].all_reduce.calls, 3) << "max, sum of exp, target logit";
    EXPECT_EQ(counters[r].all_reduce.bytes, 3L * kRows * 4);
    EXPECT_EQ(counters[r].total_calls(), 3) << "the logits are never gathered";
  }
}

TEST_P(VocabParallelCrossEntropyTest, Bf16GradientIsTheFullSoftmaxsRounded) {
  const int t = GetParam(), vocab_local = kPadded / t;
  const std::vector<float> logits = padded_logits(42);
  std::vector<std::vector<float>> losses(t), grads(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    std::vector<float> local = column_block(logits, kRows, kPadded, r * vocab_local, vocab_local);
    std::vector<kernels::bf16_t> grad16(local.size());
    losses[r].resize(kRows);
    shard_of(tp).forward(local.data(), kTargets.data(), kRows, losses[r].data(), kScale,
                         grad16.data());
    grads[r].resize(local.size());
    kernels::from_bf16(grad16.data(), grads[r].data(), (long)grad16.size());
  });
  const Reference ref = reference(logits);
  const std::vector<float> grad = join_columns(grads, kRows);
  for (size_t i = 0; i < grad.size(); ++i)
    EXPECT_NEAR(grad[i], ref.grad[i], std::abs(ref.grad[i]) / 256 + 1e-6) << "element " << i;
  for (int r = 0; r < t; ++r) EXPECT_LT(relative_error(losses[r], ref.loss), 1e-5) << "rank " << r;
}

// A target of -1 is one the loss does not count (train --sft): its loss and its whole
// gradient row are 0 on every rank, and the other rows are untouched.
TEST_P(VocabParallelCrossEntropyTest, UncountedTargetsHaveNoLossAndNoGradient) {
  const int t = GetParam(), vocab_local = kPadded / t;
  const std::vector<float> logits = padded_logits(43);
  std::vector<int> targets = kTargets;
  targets[1] = targets[3] = -1;
  std::vector<std::vector<float>> losses(t), grads(t);
  run_group(t, [&](comm::Communicator& tp) {
    const int r = tp.rank();
    grads[r] = column_block(logits, kRows, kPadded, r * vocab_local, vocab_local);
    losses[r].resize(kRows);
    shard_of(tp).forward(grads[r].data(), targets.data(), kRows, losses[r].data(), kScale);
  });
  const Reference ref = reference(logits);
  const std::vector<float> grad = join_columns(grads, kRows);
  for (int row = 0; row < kRows; ++row) {
    const bool counted = targets[row] >= 0;
    for (int r = 0; r < t; ++r)
      EXPECT_NEAR(losses[r][row], counted ? ref.loss[row] : 0.0, 1e-5 * std::abs(ref.loss[row]))
          << "row " << row << " rank " << r;
    for (int c = 0; c < kPadded; ++c) {
      const size_t i = (size_t)row * kPadded + c;
      EXPECT_NEAR(grad[i], counted ? ref.grad[i] : 0.0, 1e-6) << "row " << row << " col " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TensorParallelSizes, VocabParallelCrossEntropyTest,
                         ::testing::Values(1, 2, 4), tensor_parallel_size);

}  // namespace
}  // namespace trident
