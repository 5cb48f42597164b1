#pragma once
// The data-parallel hooks of a rank's model, registered the way Megatron's DDP registers
// its own: each chunk tells its gradient reducer which gradients are final (so buckets are
// reduced while backward continues), lets in-flight reductions progress between the big
// products, and waits for the distributed optimizer's parameter all-gather only where a
// forward reads those parameters. Whoever runs the pipeline calls this once; the step
// itself (engine/optimizer_step.h) then finds the reductions under way.
#include "engine/rank_model.h"
#include "pipeline_parallel/executor.h"

namespace trident::engine {

struct GradSyncOptions {
  int data_parallel_size = 1;
  bool overlap_grad_reduce = false;   // progress the reductions during backward
  bool overlap_param_gather = false;  // the all-gather waits inside the forward
};

// The hooks hold the chunks, reducers and executor by address: `model` and `executor` must
// outlive every step run with them (the chunks and reducers are not moved with the model).
void register_grad_sync_hooks(RankModel& model, pipeline_parallel::PipelineExecutor& executor,
                              const GradSyncOptions& options);

}  // namespace trident::engine
