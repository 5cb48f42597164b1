#pragma once
// Context parallelism's traffic and its exposed time, per layer and micro-batch on one rank,
// as trident's three attention paths (src/context_parallel) send it, everything fp32:
// - p2p (the ring): forward, each rank sends c - 1 key/value blocks of its seq / c tokens
//   (2 (c - 1) / c of the whole sequence's K bytes: Megatron's count), one per ring step,
//   each in flight while the step's flash tiles run (1/c of the rank's attention core, the
//   load-balanced chunks making every step equal); backward the blocks go round again and
//   each block's d K | d V follows one step behind (c sends, the last one, home, after the
//   loop), so a step's exposed time is max(0, its messages - its compute);
// - a2a (DeepSpeed-Ulysses): forward an all-to-all of q | k | v and one of out | lse;
//   backward one of q | k | v | out | d out | lse and one of d q | d k | d v; not overlapped;
// - allgather: forward an all-gather of q | k | v, backward of q | k | v, out, d out and lse;
//   not overlapped (and each rank computes the whole sequence's attention: c x a rank's).
// Recomputation (full or selective) runs the attention core, and so its forward traffic, again.
#include "config/model_config.h"
#include "context_parallel/context_parallel.h"
#include "planner/cluster.h"

namespace trident::planner {

// Bytes of one layer's attention operands on one rank for one micro-batch.
struct ContextOperands {
  int context = 1;
  double kv_block = 0;  // this rank's K and V (its seq / c tokens, its t-share of kv heads)
  double q = 0;         // its queries (and out, d out)
  double lse = 0;       // one float per query row and head
};
ContextOperands context_operands(const ModelConfig& m, int tensor, int micro_batch, int context);

struct ContextComm {
  double forward_bytes = 0, backward_bytes = 0;      // sent by a rank (recomputation apart)
  double forward_exposed = 0, backward_exposed = 0;  // seconds not hidden behind attention
};

// attention_forward / backward: the seconds of this rank's attention core (its 1/c share),
// which the ring's messages overlap.
ContextComm context_comm(const ContextOperands& x, context_parallel::CpCommType type,
                         double attention_forward, double attention_backward, const LinkSpec& link);

}  // namespace trident::planner
