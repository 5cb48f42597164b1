#pragma once
// What would make a layout fit the memory its ranks have: each remedy is the layout with
// a change (bf16, full recomputation, a smaller micro-batch, more pipeline stages, the
// distributed optimizer over more data-parallel ranks, more context-parallel ranks), sized by the
// same memory plan build_rank_model allocates (engine/rank_memory.h), so a remedy listed is one
// that fits.
#include <string>
#include <vector>

#include "engine/rank_model.h"

namespace trident::engine {

struct MemoryRemedy {
  std::string flags;      // what to pass, e.g. "--bf16 --micro-batch-size 1"
  int world_size = 0;     // the ranks it runs on (t x c x p x d)
  long needed_bytes = 0;  // its fullest pipeline stage's plan
  std::string describe(int current_world_size) const;
};

// The fullest stage's plan of `o` in bytes (engine::fullest_stage).
long needed_bytes(const RankModelOptions& o);

// The remedies with which every rank's plan fits in `available_bytes`, ranks per node as
// now (more ranks: more nodes). On the ranks as they are: --bf16, --recompute-granularity
// full, the largest smaller --micro-batch-size, each where it fits alone, or else those that
// lower the plan, together. Then the fewest pipeline stages, the fewest data-parallel ranks
// with --use-distributed-optimizer, and the fewest context-parallel ranks (each sequence
// split over more ranks: what shrinks a long sequence's activations), that fit; and with
// those changes too when that takes fewer ranks. Every remedy keeps the layout's other
// sizes, its c included. Empty when nothing tried fits. (More tensor-parallel ranks are not
// tried: a tensor group stays on one node, whose memory t ranks then share; on as many ranks
// per node the group would span nodes.)
std::vector<MemoryRemedy> memory_remedies(const RankModelOptions& o, long available_bytes);

}  // namespace trident::engine
