#pragma once
// Every buffer a rank of a layout will hold, from the layout alone: the plans build_rank_model
// prints once it has allocated them (its chunks' plans, Adam moments as the optimizer shards
// them, and the rank's buffers besides the chunks). Training checks them against the node's
// memory before allocating anything, and the planner sizes the layouts it never builds with
// the same function.
#include <functional>
#include <string>
#include <vector>

#include "engine/rank_layout.h"
#include "engine/rank_model.h"
#include "model/chunk_memory.h"
#include "model/memory_plan.h"

namespace trident::engine {

struct RankMemoryPlan {
  std::vector<MemoryPlan> chunks;  // one per model chunk, in order
  MemoryPlan buffers;              // besides the chunks (engine/rank_buffers.h)
  long total_bytes() const;
  long group_bytes(const std::string& group) const;
};

// A chunk's parameter sizes: the planner caches them over thousands of layouts; empty: from
// each chunk's parameter layout.
using ChunkSizes = std::function<LayoutSizes(const ChunkPlacement&)>;

// A chunk's plan as the data-parallel sharding strategy shrinks it: the Adam moments, the
// gradients and, with sharded weights, the weights and their 16-bit copy held at once.
// Returns the floats of its gradient reductions in flight (MPI's temporaries). Both the plan
// and build_rank_model size the chunk with it.
long shard_chunk_plan(MemoryPlan& plan, const RankLayout& layout, const ChunkPlacement& placement,
                      const LayoutSizes& sizes, long parameter_floats, bool overlap_grad_reduce);

// Pipeline rank `stage` of `layout` (tensor-parallel rank 0: every tensor rank holds as much),
// with the schedule's needs, the run's largest number of micro-batches and whether gradient
// buckets are reduced while backward runs.
RankMemoryPlan planned_rank_memory(const RankLayout& layout, int stage, const ScheduleNeeds& needs,
                                   int microbatches, bool overlap_grad_reduce,
                                   const ChunkSizes& sizes = {});

// What build_rank_model(o, ...) allocates on pipeline rank `stage`.
RankMemoryPlan planned_rank_memory(const RankModelOptions& o, int stage);

// The pipeline rank that needs the most memory (the first, on a tie) and its plan.
struct FullestStage {
  int stage = 0;
  RankMemoryPlan plan;
};
FullestStage fullest_stage(const RankModelOptions& o);

}  // namespace trident::engine
