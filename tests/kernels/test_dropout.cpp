// Dropout: the Philox generator against the published known-answer vectors (Random123's
// kat_vectors), the fused bias + dropout + residual kernel against the un-fused steps,
// and the model: recomputation (full: block and uniform groups; selective) reproduces the
// masks bit for bit, with the activation memory a formula of the layer sizes predicts.
#include <gtest/gtest.h>

#include <algorithm>

#include "comm/communicator.h"
#include "data/mock_dataset.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "model/gpt_model.h"
#include "test_util.h"

namespace trident {
namespace {

using testing::random_vector;

TEST(Philox, KnownAnswerVectors) {
  using A4 = std::array<std::uint32_t, 4>;
  EXPECT_EQ(kernels::philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(kernels::philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                                   {0xffffffff, 0xffffffff}),
            (A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(kernels::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                                   {0xa4093822, 0x299f31d0}),
            (A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Dropout, MaskIsCounterBasedAndDropsAboutP) {
  kernels::DropoutStream s{42, 3, 17, 0.25f};
  std::vector<std::uint8_t> all(10000), part(37);
  kernels::dropout_keep_mask(s, 0, (int)all.size(), all.data());
  kernels::dropout_keep_mask(s, 1001, (int)part.size(), part.data());  // unaligned start
  long kept = 0;
  for (size_t i = 0; i < all.size(); ++i) kept += all[i];
  EXPECT_NEAR(kept / 10000.0, 0.75, 0.015);
  for (size_t k = 0; k < part.size(); ++k) {
    EXPECT_EQ(part[k], all[1001 + k]);
    EXPECT_EQ(part[k], kernels::dropout_keeps(s, 1001 + k));
  }
  kernels::DropoutStream other = s;
  other.sample = 18;
  std::vector<std::uint8_t> next(all.size());
  kernels::dropout_keep_mask(other, 0, (int)next.size(), next.data());
  EXPECT_NE(next, all);  // another sample, another mask
}

TEST(Dropout, FusedBiasDropoutResidualMatchesUnfusedSteps) {
  const int rows = 12, cols = 40, seq = 4;
  kernels::DropoutConfig config{0.2f, 0.f, 77};
  kernels::DropoutBatch batch{&config, 9, seq};
  auto residual = random_vector(rows * cols, 1), y = random_vector(rows * cols, 2);
  auto bias = random_vector(cols, 3), dout = random_vector(rows * cols, 4);
  std::vector<float> fused(rows * cols), dy(rows * cols);
  kernels::bias_dropout_residual_add(residual.data(), y.data(), bias.data(), fused.data(), rows,
                                     cols, batch, 5);
  // Un-fused: add the bias, mask element by element, add the residual.
  std::vector<float> branch = y;
  kernels::add_bias(branch.data(), bias.data(), rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      kernels::DropoutStream s{77, 5, (std::uint32_t)(9 + r / seq), 0.2f};
      bool keep = kernels::dropout_keeps(s, (std::uint64_t)(r % seq) * cols + c);
      float expect = residual[r * cols + c] + (keep ? branch[r * cols + c] / 0.8f : 0.f);
      EXPECT_NEAR(fused[r * cols + c], expect, 1e-6f);
      const float* g = kernels::dropout_backward(dout.data(), dy.data(), rows, cols, batch, 5);
      ASSERT_EQ(g, dy.data());
      EXPECT_NEAR(dy[r * cols + c], keep ? dout[r * cols + c] / 0.8f : 0.f, 1e-6f);
    }
  // Not training: the plain fused bias + residual, and backward passes dout through.
  kernels::DropoutBatch eval{&config, -1, seq};
  kernels::bias_dropout_residual_add(residual.data(), y.data(), bias.data(), fused.data(), rows,
                                     cols, eval, 5);
  for (int i = 0; i < rows * cols; ++i) EXPECT_NEAR(fused[i], residual[i] + branch[i], 1e-6f);
  EXPECT_EQ(kernels::dropout_backward(dout.data(), dy.data(), rows, cols, eval, 5), dout.data());
}

// Sequence parallelism: a rank given rows [first_row, first_row + n) of the micro-batch
// draws exactly the masks the whole micro-batch draws for those rows, also when a block
// starts inside a sample.
TEST(Dropout, RowBlocksDrawTheWholeBatchMasks) {
  const int rows = 12, cols = 8, seq = 6;
  kernels::DropoutConfig config{0.3f, 0.f, 5};
  auto x = random_vector(rows * cols, 6);
  std::vector<float> whole = x;
  kernels::dropout_inplace(whole.data(), rows, cols, {&config, 4, seq}, 7);
  for (int t : {2, 3, 4}) {
    const int n = rows / t;
    for (int r = 0; r < t; ++r) {
      std::vector<float> block(x.begin() + (long)r * n * cols,
                               x.begin() + (long)(r + 1) * n * cols);
      kernels::dropout_inplace(block.data(), n, cols, {&config, 4, seq, (long)r * n}, 7);
      EXPECT_TRUE(std::equal(block.begin(), block.end(), whole.begin() + (long)r * n * cols))
          << "t " << t << " block " << r;
    }
  }
}

ModelConfig small_model() {
  ModelConfig c;
  c.num_layers = 3, c.hidden_size = 16, c.num_attention_heads = 2, c.seq_length = 9;
  c.vocab_size = 37;
  c.make_vocab_size_divisible_by = 128;
  return c;
}

struct RecomputeCase {
  const char* name;
  int recompute_layers;
  bool selective;
  float dropout;
  int group = 1;  // ChunkOptions::recompute_group (uniform: --recompute-num-layers)
  int layers = 3;
  bool bf16 = false;
};

// Activation floats of a chunk holding the whole model (fp32 or bf16), from the tensor
// shapes alone: each slot keeps the embedding output, the final LayerNorm + loss buffers,
// every activation of the layers that are not recomputed, and one layer output per
// recomputed group (the next group's input, or the chunk's output); the recomputed groups
// share one group's activations plus the outputs inside a group.
long expected_activation_floats(const ModelConfig& c, int batch, int slots,
                                const RecomputeCase& rc) {
  const long b = batch, s = c.seq_length, h = c.hidden_size, tokens = b * s, out = tokens * h;
  auto gemm_only = [&](long n) { return rc.bf16 ? (n + 1) / 2 : n; };  // bf16: two a float
  const long layer = gemm_only(tokens * h) + 4 * tokens             // ln1 out, ln1/ln2 mean + rstd
                     + 3 * tokens * h                               // qkv
                     + tokens * h + b * c.num_attention_heads * s   // attention out + lse
                     + tokens * h + gemm_only(tokens * h)           // residual, ln2 out
                     + 4 * tokens * h + gemm_only(4 * tokens * h);  // fc1 out, GeLU out
  const long edges = out + gemm_only(out) + 2 * tokens + out + tokens;  // input, final ln, loss
  const int recomputed = std::min(rc.recompute_layers, rc.layers);
  const int group = std::clamp(rc.group, 1, std::max(1, recomputed));
  const int groups = (recomputed + group - 1) / group;
  const long kept = (long)(rc.layers - recomputed) * (layer + out) + (long)groups * out;
  const long shared = recomputed > 0 ? group * layer + (group - 1) * out : 0;
  return slots * (edges + kept) + shared;
}

class Recomputation : public ::testing::TestWithParam<RecomputeCase> {};

// Two micro-batches in flight (F0 F1 B1 B0) share the recompute buffers; with dropout on,
// the recomputed forward must draw the same masks, so gradients stay bit-identical.
TEST_P(Recomputation, GradientsAreBitIdenticalWithLessMemory) {
  const RecomputeCase rc = GetParam();
  ModelConfig c = small_model();
  c.num_layers = rc.layers;
  comm::SingleRankCommunicator tp("tensor");
  ChunkOptions keep, recompute;
  keep.slots = recompute.slots = 2;
  keep.dropout = recompute.dropout = {rc.dropout, rc.dropout, 11};
  keep.precision = recompute.precision =
      rc.bf16 ? kernels::Precision::kBf16 : kernels::Precision::kFp32;
  recompute.recompute_layers = rc.recompute_layers;
  recompute.recompute_group = rc.group;
  recompute.recompute_attention = rc.selective;
  GPTModel plain(c, tp, 2, c.seq_length, keep), recomputed(c, tp, 2, c.seq_length, recompute);
  data::MockGPTDataset data(c.vocab_size, c.seq_length, 3);
  std::vector<int> tokens(4 * (c.seq_length + 1));
  for (int i = 0; i < 4; ++i) data.sample(i, tokens.data() + i * (c.seq_length + 1));
  auto run = [&](GPTModel& m) {
    m.parameters().initialize(4, 0.2f, c.num_layers);
    m.parameters().zero_grads();
    const int* second = tokens.data() + 2 * (c.seq_length + 1);
    double loss = m.forward_chunk(0, tokens.data(), 2, c.seq_length, 0.05f, nullptr, 0) +
                  m.forward_chunk(1, second, 2, c.seq_length, 0.05f, nullptr, 2);
    m.backward_chunk(1, 2, c.seq_length);
    m.backward_chunk(0, 2, c.seq_length);
    return loss;
  };
  EXPECT_EQ(run(plain), run(recomputed));
  for (long i = 0; i < plain.parameters().size(); ++i)
    ASSERT_EQ(plain.parameters().grads()[i], recomputed.parameters().grads()[i]) << i;
  const long saved = plain.memory_plan().group_bytes("activations") -
                     recomputed.memory_plan().group_bytes("activations");
  if (rc.selective) {  // attention out + log-sum-exp: one shared copy instead of 3 layers x 2
    const long per_copy = 2L * c.seq_length * c.hidden_size + 2L * 2 * c.seq_length;
    EXPECT_EQ(saved, (3 * 2 - 1) * per_copy * 4);
  } else {
    RecomputeCase none = rc;
    none.recompute_layers = 0;
    EXPECT_EQ(plain.memory_plan().group_bytes("activations"),
              4 * expected_activation_floats(c, 2, 2, none));
    EXPECT_EQ(recomputed.memory_plan().group_bytes("activations"),
              4 * expected_activation_floats(c, 2, 2, rc));
  }
  if (rc.dropout > 0) {  // and dropout did change the loss
    ChunkOptions none = keep;
    none.dropout = {};
    GPTModel undropped(c, tp, 2, c.seq_length, none);
    EXPECT_NE(run(undropped), run(plain));
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, Recomputation,
                         ::testing::Values(RecomputeCase{"full", 2, false, 0.f},
                                           RecomputeCase{"full_dropout", 3, false, 0.2f},
                                           RecomputeCase{"uniform2", 4, false, 0.f, 2, 4},
                                           RecomputeCase{"uniform2_dropout", 4, false, 0.2f, 2, 4},
                                           RecomputeCase{"uniform3_uneven", 4, false, 0.2f, 3, 4},
                                           RecomputeCase{"uniform_whole", 4, false, 0.2f, 6, 4},
                                           RecomputeCase{"uniform2_bf16", 4, false, 0.2f, 2, 4,
                                                         true},
                                           RecomputeCase{"block_bf16", 2, false, 0.2f, 1, 4, true},
                                           RecomputeCase{"selective", 0, true, 0.f},
                                           RecomputeCase{"selective_dropout", 0, true, 0.2f}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace trident
