// Ring attention (--cp-comm-type p2p) against the one-process kernel on the whole sequence:
// c ranks as threads, each rank's out, lse and dqkv against the kernel's rows at its global
// positions, over c, sequence (chunks shorter and longer than a tile, not a multiple of
// one), grouped-query heads, sliding windows, packed documents with per-document RoPE
// positions, dropout and bf16 tiles.
#include <gtest/gtest.h>

#include <stdexcept>

#include "context_parallel/cp_attention_test_util.h"
#include "context_parallel/ring_attention.h"

namespace trident {
namespace {

using cp_test::Case;
using kernels::Precision;

const cp_test::Path kRing{context_parallel::ring_attention_forward,
                          context_parallel::ring_attention_backward,
                          context_parallel::CpCommType::kP2p};

class RingAttention : public ::testing::TestWithParam<Case> {};

TEST_P(RingAttention, MatchesTheOneProcessKernel) {
  const Case k = GetParam();
  const cp_test::Errors e = cp_test::run_cp(cp_test::make_problem(k), kRing);
  EXPECT_LT(e.out, cp_test::tolerance(k));
  EXPECT_LT(e.lse, cp_test::tolerance(k));
  EXPECT_LT(e.dqkv, cp_test::tolerance(k));
  // The forward's traffic: c - 1 key / value blocks sent by each rank (2 (c - 1) / c of the
  // sequence's K and V), the planner's figure.
  const long block = 2L * k.batch * k.kv_heads * (k.seq / k.c) * k.head_dim;
  EXPECT_EQ(e.sent_floats, (k.c - 1) * block);
}

// {c, batch, seq, heads, kv heads, head dim, window, documents, reset positions, rope,
// dropout, precision}
INSTANTIATE_TEST_SUITE_P(
    Cases, RingAttention,
    ::testing::Values(Case{2, 2, 48, 2, 2, 8},                           // chunks of 12
                      Case{4, 1, 160, 4, 2, 16, 0, false, false, true},  // GQA, RoPE
                      Case{2, 2, 272, 2, 1, 8, 50},                      // chunks of 68: two tiles
                      Case{4, 2, 96, 2, 2, 8, 7},                        // window < chunk
                      Case{4, 2, 96, 4, 2, 8, 0, true, true, true},      // documents
                      Case{2, 1, 200, 2, 2, 8, 30, true, false, true, 0.2f},  // dropout
                      Case{2, 2, 136, 4, 2, 16, 0, true, true, true, 0.1f, Precision::kBf16},
                      Case{3, 1, 90, 3, 3, 8, 0, false, false, true, 0.1f}));  // odd c

TEST(RingAttentionInput, OddLocalSequenceIsRefused) {
  const kernels::AttentionShape s{1, 5, 1, 4};
  const std::vector<int> pos(5, 0);
  kernels::AttentionShape with_pos = s;
  with_pos.positions = pos.data();
  std::vector<float> qkv(5 * 12), out(5 * 4), lse(5);
  EXPECT_THROW(tensor_parallel_test::run_group(2,
                                               [&](comm::Communicator& g) {
                                                 context_parallel::ring_attention_forward(
                                                     qkv.data(), kernels::QkvLayout::packed(1, 4),
                                                     out.data(), lse.data(), with_pos, {},
                                                     Precision::kFp32, nullptr, {2, g.rank(), &g});
                                               }),
               std::invalid_argument);
}

}  // namespace
}  // namespace trident
