#include "context_parallel/buffers.h"

#include <algorithm>

namespace trident::context_parallel {

RingBuffers ring_buffers(const CpAttentionShape& s) {
  RingBuffers r;
  r.q = s.batch * s.heads * s.seq * s.head_dim;
  r.kv = s.batch * s.kv_heads * s.seq * s.head_dim;
  r.rows = s.batch * s.heads * s.seq;
  return r;
}

namespace {

// a2a_attention.cpp: the head-split q | k | v (the whole sequence, heads / c: as many floats
// as this rank's rows, qkv3), each exchange's send and receive buffers (as large as what it
// exchanges, each), and the head-split output, d out and lse.
long a2a_floats(const RingBuffers& r) {
  const long qkv3 = r.q + r.block();
  const long forward = std::max(qkv3 + 2 * qkv3,  // the q | k | v exchange
                                qkv3 + r.q + r.rows + 2 * (r.q + r.rows));  // out | lse back
  const long operands = qkv3 + 2 * r.q + r.rows;  // q | k | v, out, d out, lse
  const long backward = std::max(qkv3 + 2 * r.q + r.rows + 2 * operands,  // operands exchange
                                 qkv3 + 2 * r.q + r.rows + 3 * qkv3);     // d q | d k | d v back
  return std::max(forward, backward);
}

// allgather_attention.cpp: gather_rows holds every rank's block twice (received, then
// reordered) while it runs; the whole sequence's q | k | v, output, lse (and, in backward,
// d out and the whole d q | d k | d v, then this rank's rows of it) stay.
long allgather_floats(const RingBuffers& r, int c) {
  const long qkv3 = r.q + r.block();
  const long forward = std::max(qkv3 + 2 * c * qkv3, c * qkv3 + c * (r.q + r.rows));
  const long backward =
      std::max(qkv3 + 2 * c * qkv3, 2 * c * qkv3 + 2 * c * r.q + c * r.rows + qkv3);
  return std::max(forward, backward);
}

}  // namespace

long attention_buffer_floats(CpCommType type, const CpAttentionShape& s) {
  if (s.size <= 1) return 0;
  const RingBuffers r = ring_buffers(s);
  switch (type) {
    case CpCommType::kP2p:
      return std::max(r.forward(), r.backward());
    case CpCommType::kA2a:
      return a2a_floats(r);
    case CpCommType::kAllGather:
      return allgather_floats(r, s.size);
  }
  return 0;
}

}  // namespace trident::context_parallel
