#include "engine/rank_memory.h"

#include <algorithm>

namespace trident::engine {

long RankMemoryPlan::total_bytes() const {
  long total = buffers.total_bytes();
  for (const MemoryPlan& plan : chunks) total += plan.total_bytes();
  return total;
}

long RankMemoryPlan::group_bytes(const std::string& group) const {
  long total = buffers.group_bytes(group);
  for (const MemoryPlan& plan : chunks) total += plan.group_bytes(group);
  return total;
}

long shard_chunk_plan(MemoryPlan& plan, const RankLayout& layout, const ChunkPlacement& placement,
                      const LayoutSizes& sizes, long parameter_floats, bool overlap_grad_reduce) {
  plan.resize("adam exp_avg + exp_avg_sq", adam_moment_floats(layout, parameter_floats));
  if (sizes.experts > 0) {
    const long pad = layout.distributed_optimizer ? 16L * expert_data_size(layout) : 16;
    plan.resize(kExpertMomentsRow,
                expert_moment_floats(layout, (sizes.experts + pad - 1) / pad * pad));
  }
  const long pad = layout.distributed_optimizer ? 16L * layout.data : 16;  // chunk_options'
  const long lora = lora_adapter_floats(layout.model, {0, layout.tensor}, placement, pad);
  if (lora > 0) plan.resize(kLoraMomentsRow, adam_moment_floats(layout, lora));
  const HeldGradientFloats grads =
      held_gradient_floats(layout, placement, sizes, parameter_floats, overlap_grad_reduce);
  plan.resize("gradients", grads.resident);
  const HeldWeightFloats weights = held_weight_floats(layout, placement, sizes, parameter_floats);
  plan.resize("weights", weights.weights);
  if (layout.precision != kernels::Precision::kFp32)
    plan.resize(kernels::precision_name(layout.precision) + std::string(" weight copy"),
                weights.low_precision_copy);
  return grads.in_flight;
}

namespace {

RankMemoryPlan plan_of(const RankLayout& layout, int stage, const ScheduleNeeds& needs,
                       int microbatches, bool overlap_grad_reduce, const ChunkSizes& sizes,
                       bool checkpoint_snapshot) {
  RankMemoryPlan out;
  const TensorParallelRank tp{0, layout.tensor};
  const int seq = layout.model.seq_length;
  long gradient_floats = 0, expert_floats = 0, in_flight = 0;
  for (int j = 0; j < layout.virtual_stages; ++j) {
    const ChunkOptions o = chunk_options(layout, stage, j, needs);
    const LayoutSizes ls = sizes ? sizes(o.placement)
                                 : layout_sizes(layout.model, tp, o.placement, o.expert_parallel,
                                                o.expert_tensor_parallel);
    const ChunkShape shape = chunk_shape(layout.model, tp, layout.micro_batch, seq, o, ls);
    out.chunks.push_back(plan_chunk_memory(shape));
    in_flight += shard_chunk_plan(out.chunks.back(), layout, o.placement, ls,
                                  shape.parameter_floats, overlap_grad_reduce);
    // LoRA: the adapters are what is reduced and updated (the base has no gradients).
    gradient_floats += shape.lora_floats > 0 ? shape.lora_floats : shape.parameter_floats;
    expert_floats += shape.expert_floats;
  }
  RankBufferShape buffers =
      rank_buffer_shape(layout, stage, microbatches, gradient_floats, overlap_grad_reduce);
  if (layout.shard_gradients) buffers.reduction_cap_floats = in_flight;
  // As checkpoint::reserve_snapshot_buffers: the optimizer's shard (adam_moment_floats' half),
  // and the expert buffers' (expert parallelism).
  if (checkpoint_snapshot)
    buffers.checkpoint_snapshot_floats = adam_moment_floats(layout, gradient_floats) / 2 +
                                         expert_moment_floats(layout, expert_floats) / 2;
  out.buffers = plan_rank_buffers(buffers);
  return out;
}

}  // namespace

RankMemoryPlan planned_rank_memory(const RankLayout& layout, int stage, const ScheduleNeeds& needs,
                                   int microbatches, bool overlap_grad_reduce,
                                   const ChunkSizes& sizes) {
  return plan_of(layout, stage, needs, microbatches, overlap_grad_reduce, sizes, false);
}

RankMemoryPlan planned_rank_memory(const RankModelOptions& o, int stage) {
  int microbatches = 1;
  for (const pipeline_parallel::ScheduleConfig& s : o.schedules)
    microbatches = std::max(microbatches, s.microbatches);
  return plan_of(o.layout, stage, schedule_needs(o.schedules, stage), microbatches,
                 o.reduce.overlap, {}, o.async_save);
}

FullestStage fullest_stage(const RankModelOptions& o) {
  FullestStage fullest{0, planned_rank_memory(o, 0)};
  for (int stage = 1; stage < o.layout.pipeline; ++stage) {
    RankMemoryPlan plan = planned_rank_memory(o, stage);
    if (plan.total_bytes() > fullest.plan.total_bytes()) fullest = {stage, std::move(plan)};
  }
  return fullest;
}

}  // namespace trident::engine
