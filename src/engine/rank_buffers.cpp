#include "engine/rank_buffers.h"

#include <algorithm>

namespace trident::engine {

MemoryPlan plan_rank_buffers(const RankBufferShape& s) {
  MemoryPlan plan;
  const char* C = "communication";
  if (s.stages > 1) {
    // Every chunk but the very first virtual stage sends d(input) backward, from a copy.
    const int sending_chunks = s.stage == 0 ? s.chunks - 1 : s.chunks;
    if (sending_chunks > 0)
      plan.add(C, "pipeline: copies of sent input gradients", s.boundary_floats,
               s.microbatches * sending_chunks);
    // An untied output layer (Llama) has no second copy of the word embedding.
    if ((s.stage == 0 || s.stage == s.stages - 1) && s.tied_embedding_floats > 0)
      plan.add(C, "pipeline: tied embedding gradient from the other end", s.tied_embedding_floats);
  }
  // Open MPI's libnbc stages each non-blocking reduction in a temporary of its size; at the
  // end of the last backward every bucket can be in flight; with sharded gradients a few
  // buckets are, overlapped or not. (Without overlap the step launches every bucket at once
  // too: their temporaries are not planned yet.)
  if (s.data > 1 && s.reduction_cap_floats > 0)
    plan.add(C, "data parallel: MPI temporaries of in-flight buckets",
             std::min(s.gradient_floats, s.reduction_cap_floats));
  else if (s.data > 1 && s.overlap_grad_reduce)
    plan.add(C, "data parallel: MPI temporaries of in-flight buckets", s.gradient_floats);
  if (s.checkpoint_snapshot_floats > 0)
    plan.add("checkpoint", "--async-save snapshot: weights, exp_avg, exp_avg_sq",
             s.checkpoint_snapshot_floats, 3);
  return plan;
}

}  // namespace trident::engine
