#include "planner/context_comm.h"

#include <algorithm>

#include "planner/collectives.h"

namespace trident::planner {

namespace {

// trident's attention paths exchange fp32 (context_parallel/ring_attention.cpp's vectors).
constexpr double kBytes = 4;

// The ring: step j's messages in flight while its tiles run (the step's share of the core).
ContextComm ring_comm(const ContextOperands& x, double forward, double backward,
                      const LinkSpec& link) {
  const int c = x.context;
  const double block = point_to_point_seconds(x.kv_block, link);
  const double two = point_to_point_seconds(2 * x.kv_block, link);
  ContextComm out;
  out.forward_bytes = (c - 1) * x.kv_block;
  out.forward_exposed = (c - 1) * std::max(0.0, block - forward / c);
  // Backward step 0 sends the next key/value block; steps 1 .. c - 2 that and the previous
  // step's d K | d V; step c - 1 only the gradient; the last gradient goes home after the loop.
  out.backward_bytes = (2 * c - 1) * x.kv_block;
  const double step = backward / c;
  out.backward_exposed = std::max(0.0, block - step) + (c - 2) * std::max(0.0, two - step) +
                         std::max(0.0, block - step) + block;
  return out;
}

ContextComm a2a_comm(const ContextOperands& x, const LinkSpec& link) {
  const int c = x.context;
  const double qkv = x.q + x.kv_block, out = x.q + x.lse;
  const double forward[] = {qkv, out}, backward[] = {qkv + 2 * x.q + x.lse, qkv};
  ContextComm r;
  for (double b : forward) {
    r.forward_bytes += (c - 1.0) / c * b;
    r.forward_exposed += all_to_all_seconds(b, c, link);
  }
  for (double b : backward) {
    r.backward_bytes += (c - 1.0) / c * b;
    r.backward_exposed += all_to_all_seconds(b, c, link);
  }
  return r;
}

ContextComm allgather_comm(const ContextOperands& x, const LinkSpec& link) {
  const int c = x.context;
  const double qkv = x.q + x.kv_block;  // one rank's share; c of them gathered
  ContextComm r;
  r.forward_bytes = (c - 1) * qkv;
  r.forward_exposed = ring_all_gather_seconds(c * qkv, c, link);
  const double backward[] = {qkv, x.q, x.q, x.lse};
  for (double b : backward) {
    r.backward_bytes += (c - 1) * b;
    r.backward_exposed += ring_all_gather_seconds(c * b, c, link);
  }
  return r;
}

}  // namespace

ContextOperands context_operands(const ModelConfig& m, int tensor, int micro_batch, int context) {
  const double tokens = (double)micro_batch * m.seq_length / context;
  const double heads = (double)m.num_attention_heads / tensor;
  const double kv_heads = std::max(1, m.query_groups() / tensor);
  ContextOperands x;
  x.context = context;
  x.kv_block = tokens * 2 * kv_heads * m.head_dim() * kBytes;
  x.q = tokens * heads * m.head_dim() * kBytes;
  x.lse = tokens * heads * kBytes;
  return x;
}

ContextComm context_comm(const ContextOperands& x, context_parallel::CpCommType type,
                         double attention_forward, double attention_backward,
                         const LinkSpec& link) {
  if (x.context <= 1) return {};
  switch (type) {
    case context_parallel::CpCommType::kP2p:
      return ring_comm(x, attention_forward, attention_backward, link);
    case context_parallel::CpCommType::kA2a:
      return a2a_comm(x, link);
    case context_parallel::CpCommType::kAllGather:
      return allgather_comm(x, link);
  }
  return {};
}

}  // namespace trident::planner
