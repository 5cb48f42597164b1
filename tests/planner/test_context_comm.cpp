// Context parallelism's traffic against Megatron's count worked by hand: each rank sends
// c - 1 key/value blocks of its seq / c tokens forward (2 (c - 1) / c of the sequence's K
// bytes, K and V together), and in backward the blocks again with their gradients (trident's
// ring: c - 1 key/value blocks and c gradient blocks); a ring step's messages hide behind its
// share of the attention core; all-to-all moves (c - 1) / c of what it exchanges.
#include <gtest/gtest.h>

#include "planner/context_comm.h"

namespace trident::planner {
namespace {

using context_parallel::CpCommType;

ModelConfig gpt2_small(int seq) {
  ModelConfig m;
  m.num_layers = 12, m.hidden_size = 768, m.num_attention_heads = 12, m.seq_length = seq;
  m.vocab_size = 50257;
  return m;
}

TEST(PlannerContextComm, RingBytesAreMegatronsCount) {
  // GPT-2 small at seq 8192, b = 1, fp32: the sequence's K is 8192 x 768 x 4 = 25,165,824 bytes.
  const double k_bytes = 25165824;
  for (int c : {2, 4, 8}) {
    const ContextOperands x = context_operands(gpt2_small(8192), 1, 1, c);
    EXPECT_EQ(x.kv_block, 2 * k_bytes / c) << c;  // this rank's K and V
    const ContextComm r = context_comm(x, CpCommType::kP2p, 0, 0, LinkSpec{100, 0});
    EXPECT_DOUBLE_EQ(r.forward_bytes, 2.0 * (c - 1) / c * k_bytes) << c;
    EXPECT_DOUBLE_EQ(r.backward_bytes, (2.0 * c - 1) * 2 * k_bytes / c) << c;
  }
  // c = 2 by hand: one block of 4096 tokens x (K 768 + V 768) x 4 bytes forward.
  EXPECT_EQ(context_comm(context_operands(gpt2_small(8192), 1, 1, 2), CpCommType::kP2p, 0, 0,
                         LinkSpec{100, 0})
                .forward_bytes,
            4096.0 * 1536 * 4);
}

TEST(PlannerContextComm, GroupedQueryHeadsAndTensorParallelismShrinkTheBlocks) {
  // Llama-3-8B's attention: 32 heads of 128, 8 key/value groups; t = 2 holds 4 groups. At seq
  // 32768, c = 2, b = 1: 16384 tokens x 2 (K, V) x 4 x 128 x 4 bytes.
  ModelConfig m;
  m.hidden_size = 4096, m.num_attention_heads = 32, m.seq_length = 32768;
  m.group_query_attention = true, m.num_query_groups = 8;
  const ContextOperands x = context_operands(m, 2, 1, 2);
  EXPECT_EQ(x.kv_block, 16384.0 * 2 * 4 * 128 * 4);
  EXPECT_EQ(x.q, 16384.0 * 16 * 128 * 4);
}

TEST(PlannerContextComm, RingStepsHideBehindTheirShareOfTheAttention) {
  const ContextOperands x = context_operands(gpt2_small(8192), 1, 1, 4);
  const LinkSpec slow{1, 0};  // 1 GB/s: a block takes kv_block / 1e9 s
  const double block = x.kv_block / 1e9, forward = 4e-3, backward = 8e-3;
  const ContextComm r = context_comm(x, CpCommType::kP2p, forward, backward, slow);
  // Forward: 3 sends, each beside a step of forward / 4.
  EXPECT_NEAR(r.forward_exposed, 3 * (block - 1e-3), 1e-12);
  // Backward: step 0 a block, steps 1-2 a block and a gradient, step 3 a gradient (each step
  // beside backward / 4), then the last gradient home.
  EXPECT_NEAR(r.backward_exposed, (block - 2e-3) + 2 * (2 * block - 2e-3) + (block - 2e-3) + block,
              1e-12);
  // A link fast enough: only the last gradient's trip is left.
  const LinkSpec fast{1e6, 0};
  const ContextComm hidden = context_comm(x, CpCommType::kP2p, forward, backward, fast);
  EXPECT_EQ(hidden.forward_exposed, 0);
  EXPECT_NEAR(hidden.backward_exposed, x.kv_block / 1e15, 1e-15);
}

TEST(PlannerContextComm, AllToAllAndAllGatherBytesByHand) {
  // GPT-2 small, seq 8192, c = 2: per rank q = 4096 x 768 x 4, K|V twice that, lse 4096 x 12 x 4.
  const double q = 4096.0 * 768 * 4, kv = 2 * q, lse = 4096.0 * 12 * 4;
  const ContextOperands x = context_operands(gpt2_small(8192), 1, 1, 2);
  const ContextComm a2a = context_comm(x, CpCommType::kA2a, 0, 0, LinkSpec{100, 0});
  EXPECT_DOUBLE_EQ(a2a.forward_bytes, 0.5 * (q + kv) + 0.5 * (q + lse));
  EXPECT_DOUBLE_EQ(a2a.backward_bytes, 0.5 * (q + kv + 2 * q + lse) + 0.5 * (q + kv));
  const ContextComm gather = context_comm(x, CpCommType::kAllGather, 0, 0, LinkSpec{100, 0});
  EXPECT_DOUBLE_EQ(gather.forward_bytes, q + kv);
  EXPECT_DOUBLE_EQ(gather.backward_bytes, q + kv + 2 * q + lse);
  EXPECT_NEAR(gather.forward_exposed, (q + kv) / 100e9, 1e-15);
  // c = 1: nothing.
  const ContextComm none =
      context_comm(context_operands(gpt2_small(8192), 1, 1, 1), CpCommType::kP2p, 1, 1, {1, 1});
  EXPECT_EQ(none.forward_bytes + none.backward_bytes + none.backward_exposed, 0);
}

}  // namespace
}  // namespace trident::planner
