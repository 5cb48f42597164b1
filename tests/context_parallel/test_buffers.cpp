// The buffers of one context-parallel attention call, worked by hand, and the chunk's memory
// plan holding them as one "communication" row (absent at c = 1): GPT-2 small's attention on
// one rank of c = 2 at seq 8192 (4096 local tokens, 12 heads of 64).
#include <gtest/gtest.h>

#include "context_parallel/buffers.h"
#include "model/chunk_memory.h"

namespace trident {
namespace {

using context_parallel::CpCommType;

constexpr long kQ = 4096L * 12 * 64;  // this rank's q (and out), head-major
constexpr long kRows = 4096L * 12;    // one lse / delta per query row and head

TEST(CpAttentionBuffers, RingByHand) {
  const context_parallel::CpAttentionShape s{1, 4096, 12, 12, 64, 2};
  const context_parallel::RingBuffers r = context_parallel::ring_buffers(s);
  EXPECT_EQ(r.q, kQ);
  EXPECT_EQ(r.block(), 2 * kQ);  // K and V of 12 key/value heads
  // Forward: q, o, partial o (3 q), partial lse, the held block and the arriving one.
  EXPECT_EQ(r.forward(), 3 * kQ + kRows + 2 * 2 * kQ);
  // Backward: q, o, d out, d q, delta; five blocks (held, arriving, the step's d K | d V, the
  // sum received, the sum sent).
  EXPECT_EQ(r.backward(), 4 * kQ + kRows + 5 * 2 * kQ);
  EXPECT_EQ(context_parallel::attention_buffer_floats(CpCommType::kP2p, s), r.backward());
  // Grouped-query: 4 key/value heads make the blocks a third.
  const context_parallel::CpAttentionShape gqa{1, 4096, 12, 4, 64, 2};
  EXPECT_EQ(context_parallel::ring_buffers(gqa).block(), 2 * kQ / 3);
  // c = 1 runs the one-process kernel: nothing.
  EXPECT_EQ(context_parallel::attention_buffer_floats(CpCommType::kP2p, {1, 4096, 12, 12, 64, 1}),
            0);
}

TEST(CpAttentionBuffers, AllToAllAndAllGatherByHand) {
  const context_parallel::CpAttentionShape s{1, 4096, 12, 12, 64, 2};
  const long qkv3 = 3 * kQ;  // this rank's q | k | v rows = the head-split sequence's floats
  // a2a backward: the head-split q | k | v, out, d out and lse kept, with the exchange of
  // all of them (send + receive) in flight.
  const long operands = qkv3 + 2 * kQ + kRows;
  EXPECT_EQ(context_parallel::attention_buffer_floats(CpCommType::kA2a, s),
            std::max(qkv3 + 2 * kQ + kRows + 2 * operands, qkv3 + 2 * kQ + kRows + 3 * qkv3));
  // allgather backward: the whole sequence's q | k | v and its gradient (2 c qkv3), out and
  // d out (2 c q), lse (c rows) and this rank's rows of the gradient.
  EXPECT_EQ(context_parallel::attention_buffer_floats(CpCommType::kAllGather, s),
            4 * qkv3 + 4 * kQ + 2 * kRows + qkv3);
}

TEST(CpAttentionBuffers, TheChunkPlanHoldsThemAsCommunication) {
  ModelConfig m;
  m.num_layers = 2, m.hidden_size = 768, m.num_attention_heads = 12, m.seq_length = 8192;
  m.vocab_size = 50257;
  for (int c : {1, 2}) {
    ChunkOptions o;
    o.context_parallel.size = c;
    const std::vector<ChunkBuffer> table =
        chunk_buffers(chunk_shape(m, {0, 1}, 1, m.seq_length / c, o));
    long floats = -1;
    for (const ChunkBuffer& b : table)
      if (b.name == context_parallel_row(CpCommType::kP2p)) {
        EXPECT_EQ(b.group, "communication");
        EXPECT_FALSE(b.in_arena());
        floats = b.floats();
      }
    EXPECT_EQ(floats, c == 1 ? -1 : 4 * kQ + kRows + 5 * 2 * kQ) << c;
  }
}

}  // namespace
}  // namespace trident
