#pragma once
// Buffers a rank holds besides its chunks' memory plans, sized before step 1 like them and
// printed with them: the pipeline executor's private copies of the input gradients it sends
// (one per micro-batch and chunk, kept between steps), the tied word embedding's gradient
// received from the other end of the pipeline, and the temporaries Open MPI's non-blocking
// reductions allocate while overlapped gradient buckets are in flight. The planner sizes
// layouts with the same function. With --async-save, the checkpoint snapshot too.
#include "model/memory_plan.h"

namespace trident::engine {

struct RankBufferShape {
  int stages = 1, chunks = 1, microbatches = 1;  // p, v, and the largest m of the run
  int stage = 0;
  long boundary_floats = 0;        // b x s x h: one micro-batch's activations between stages
  long tied_embedding_floats = 0;  // V / t x h: the word embedding's shard (0: untied)
  long gradient_floats = 0;        // this rank's gradient buffers, all chunks
  int data = 1;
  bool overlap_grad_reduce = false;
  // Sharded gradients: at most this many floats of buckets are reduced at once (0: no cap).
  long reduction_cap_floats = 0;
  // --async-save: the checkpoint snapshot a save copies the rank's weights and both Adam
  // moments into, kept between saves for the background writer: this many floats of each
  // (0: none) — the optimizer's shard when it is sharded (every rank writes its shard), else
  // the whole buffer (planned for every rank: data-parallel rank 0, which writes, holds it).
  long checkpoint_snapshot_floats = 0;
};

MemoryPlan plan_rank_buffers(const RankBufferShape& s);

}  // namespace trident::engine
