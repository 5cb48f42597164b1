#pragma once
// Attention at context parallelism c > 1: one dispatch over --cp-comm-type, every path
// computing exactly the attention of the c = 1 run on this rank's rows.
//
// Contract (shared by the ring (p2p), all-to-all (a2a) and all-gather paths):
// - local.seq is this rank's tokens per sample (the sequence / c), laid out as chunk
//   cp.rank then chunk 2c - 1 - cp.rank (context_parallel.h); qkv, out, dout and dqkv hold
//   batch x local.seq rows in `layout`, lse is [batch, heads, local.seq].
// - local.positions is never null: each local token's RoPE position (its global position,
//   or restarted per document under --reset-position-ids); rope's table covers the whole
//   sequence.
// - local.doc_start (null or [batch, local.seq]) holds for each local query the GLOBAL
//   position of its document's first token (--reset-attention-mask).
// - dropout's masks are those of the c = 1 run at the same global (query, key).
// - backward's dqkv (this rank's rows) is overwritten, with every query's contribution to
//   this rank's keys and values, whichever rank the query sits on.
#include "context_parallel/context_parallel.h"
#include "kernels/attention.h"

namespace trident::context_parallel {

void attention_forward(const float* qkv, const kernels::QkvLayout& layout, float* out, float* lse,
                       const kernels::AttentionShape& local,
                       const kernels::AttentionDropout& dropout, kernels::Precision precision,
                       const kernels::RopeTable* rope, const ContextParallel& cp);
void attention_backward(const float* qkv, const kernels::QkvLayout& layout, const float* out,
                        const float* dout, const float* lse, float* dqkv,
                        const kernels::AttentionShape& local,
                        const kernels::AttentionDropout& dropout, kernels::Precision precision,
                        const kernels::RopeTable* rope, const ContextParallel& cp);

// --cp-comm-type allgather: every rank all-gathers the whole sequence's q, k and v (and, in
// backward, out, d out and lse), runs the one-process flash kernel on it at the global
// positions, and keeps its own rows. It computes c x the attention of a rank, but it is the
// c = 1 computation itself, the reference the other paths are tested against. (Megatron's
// allgather gathers only K and V and computes the local queries; ours is the simple form.)
void allgather_attention_forward(const float* qkv, const kernels::QkvLayout& layout, float* out,
                                 float* lse, const kernels::AttentionShape& local,
                                 const kernels::AttentionDropout& dropout,
                                 kernels::Precision precision, const kernels::RopeTable* rope,
                                 const ContextParallel& cp);
void allgather_attention_backward(const float* qkv, const kernels::QkvLayout& layout,
                                  const float* out, const float* dout, const float* lse,
                                  float* dqkv, const kernels::AttentionShape& local,
                                  const kernels::AttentionDropout& dropout,
                                  kernels::Precision precision, const kernels::RopeTable* rope,
                                  const ContextParallel& cp);

}  // namespace trident::context_parallel
