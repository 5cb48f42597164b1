#pragma once
// Context parallelism (Megatron's --context-parallel-size c): every sequence of a micro-batch is
// cut into 2c chunks of seq / 2c tokens, and cp rank i holds chunks i and 2c - 1 - i, in that
// order (the load-balanced split Megatron uses under a causal mask: each rank gets one early and
// one late chunk, so every rank does the same attention work). Everything per token stays local;
// attention exchanges keys and values over the cp group.
#include "comm/communicator.h"

namespace trident::context_parallel {

// How attention reaches the other ranks' keys and values (Megatron's --cp-comm-type).
enum class CpCommType {
  kP2p,        // ring: key/value blocks passed around the cp group, sends overlapped with compute
  kA2a,        // DeepSpeed-Ulysses: all-to-all from sequence-split to head-split and back
  kAllGather,  // every rank gathers the whole sequence's keys and values
};

// What an attention call needs to know of the cp group. size 1: no context parallelism.
struct ContextParallel {
  int size = 1;
  int rank = 0;
  comm::Communicator* group = nullptr;  // the cp group; group->rank() == rank
  CpCommType type = CpCommType::kP2p;
  bool active() const { return size > 1; }
};

// The tokens of one chunk when a sequence of seq tokens is split over size ranks.
inline int chunk_tokens(int seq, int size) {
  return seq / (2 * size);
}

// Global position (within its sequence) of local token t of cp rank `rank`, whose local
// sequence holds seq / size tokens: chunk rank, then chunk 2 size - 1 - rank.
inline int global_position(int t, int seq, int rank, int size) {
  const int chunk = chunk_tokens(seq, size);
  return t < chunk ? rank * chunk + t : (2 * size - 1 - rank) * chunk + (t - chunk);
}

}  // namespace trident::context_parallel
