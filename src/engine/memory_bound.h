#pragma once
// A lower bound of the memory a rank of a layout holds, in closed form from the shapes and
// the layout alone: no parameter layout is built and nothing is allocated, and it is
// computed in double, so no size the flags allow overflows it. Training refuses models
// that cannot fit with it before the exact plan (engine/rank_memory.h) is even computed,
// whose cost grows with the layer count; the remedies search skips, with it, layouts that
// cannot fit.
#include <vector>

#include "engine/rank_layout.h"

namespace trident::engine {

struct MemoryBound {
  double parameters = 0;  // the whole model's (ModelConfig::parameter_shares)
  // On the fullest pipeline rank, per tensor-parallel rank: at least ceil(L / p) layers, or
  // the word embedding of the first stage, 1/t of each (replicated tensors only add).
  double rank_parameters = 0;
  // fp32 weights and gradients (8 bytes) and Adam's two moments (8 bytes, 8 / d each when
  // the distributed optimizer shards them): 16 bytes without it, as Megatron's fp32 count.
  double bytes_per_parameter = 16;
  // Every layer on the rank keeps at least its input (fp32 residual stream) for a
  // micro-batch, or one per group of layers recomputed together.
  double activation_bytes = 0;
  double parameter_bytes() const { return rank_parameters * bytes_per_parameter; }
  double total_bytes() const { return parameter_bytes() + activation_bytes; }
};

// At most what planned_rank_memory gives for the fullest pipeline rank of `layout`.
MemoryBound memory_lower_bound(const RankLayout& layout);

// `layout` changed as far as memory_remedies goes (engine/memory_fit.h): one layer per model
// chunk, 1024 times the data-parallel ranks with the distributed optimizer, micro-batch 1,
// full recomputation of single layers, the largest of more_context_ranks. Its bound is below
// every remedy's plan: above the memory there is, nothing tried fits.
RankLayout most_remedied(const RankLayout& layout);

// The context-parallel sizes a remedy may try, ascending: c doubled, up to 1024 c, while
// the rules of context parallelism allow it (context_parallel/rules.h: the sequence in 2c
// chunks, a2a's heads, no MoE or LoRA). Empty when none does.
std::vector<int> more_context_ranks(const RankLayout& layout);

}  // namespace trident::engine
