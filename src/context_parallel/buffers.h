#pragma once
// The buffers one context-parallel attention call allocates besides its arguments, in floats,
// for each --cp-comm-type: the ring's head-major q and output copies, its key/value block and
// the one in flight (double-buffered), and in backward the blocks' d K | d V on their way;
// all-to-all's send/receive buffers and the head-split sequence; all-gather's whole-sequence
// q | k | v, output and their gradients. They live only during the call (the kernels take them
// from the heap), so the memory plan holds one set per chunk (model/chunk_memory.cpp's
// "context-parallel attention" row). The ring sizes its vectors with ring_buffers; the other
// paths' peaks are written from their code (a2a_attention.cpp, allgather_attention.cpp) here,
// next to it. Integer position tables (batch x seq x c ints, 1 / (heads x head_dim) of the
// rest) are left out.
#include "context_parallel/context_parallel.h"

namespace trident::context_parallel {

// This rank's attention operands: batch x seq (its tokens) rows, its heads and key/value heads.
struct CpAttentionShape {
  long batch = 0;
  int seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int size = 1;  // c
};

// The ring's buffers (ring_attention.cpp): q and o are head-major [batch, heads, seq, hd], a
// key/value block k then v [batch, kv heads, seq, hd] each, rows one float per query and head.
struct RingBuffers {
  long q = 0, kv = 0, rows = 0;
  long block() const { return 2 * kv; }  // k and v: one message
  // q, o, the step's partial o and lse, the held block and the one arriving.
  long forward() const { return 3 * q + rows + 2 * block(); }
  // q, o, d out, d q, delta; the held and arriving blocks, the step's d K | d V, the sum
  // received and the sum sent.
  long backward() const { return 4 * q + rows + 5 * block(); }
};
RingBuffers ring_buffers(const CpAttentionShape& s);

// The most floats one forward or backward call holds at once (0 at c = 1).
long attention_buffer_floats(CpCommType type, const CpAttentionShape& s);

}  // namespace trident::context_parallel
