#pragma once
// Ring attention (Megatron's --cp-comm-type p2p): each cp rank keeps its queries and passes
// its keys and values around the cp group; at step j it holds the block of rank
// (rank - j) mod c, runs its flash tiles against it and merges the block's (out, lse) into
// the running result (the online softmax across blocks). Tiles are masked and skipped by
// global position, so Megatron's three cases of the load-balanced split fall out: the own
// block is causal; a lower rank's is seen by every query, but only its first chunk; a
// higher rank's only by the second chunk's queries, but whole. The next block's send and
// receive are posted before the current one is computed, so they overlap with it.
//
// Contract (shared with the other cp attention paths, see context_parallel.h): local.seq is
// this rank's tokens (global seq / c, chunk rank then chunk 2c - 1 - rank); local.positions
// its tokens' RoPE positions (never null at c > 1); local.doc_start [batch, local seq] the
// global position of each query's document start, or null; local.window in global
// positions; lse [batch, heads, local seq]. out, lse and dqkv equal the one-process
// kernel's rows for these tokens to float rounding, dropout included (masks keyed by the
// global sample, head, query and key).
#include "context_parallel/context_parallel.h"
#include "kernels/attention.h"

namespace trident::context_parallel {

void ring_attention_forward(const float* qkv, const kernels::QkvLayout& layout, float* out,
                            float* lse, const kernels::AttentionShape& local,
                            const kernels::AttentionDropout& dropout, kernels::Precision precision,
                            const kernels::RopeTable* rope, const ContextParallel& cp);

// Backward: the ring again with the forward's final lse; dq accumulates here, and each block's
// d k and d v travel with it around the ring and arrive, summed over every rank's queries,
// at their owner. dqkv is overwritten (unread key / value heads 0).
void ring_attention_backward(const float* qkv, const kernels::QkvLayout& layout, const float* out,
                             const float* dout, const float* lse, float* dqkv,
                             const kernels::AttentionShape& local,
                             const kernels::AttentionDropout& dropout, kernels::Precision precision,
                             const kernels::RopeTable* rope, const ContextParallel& cp);

}  // namespace trident::context_parallel
