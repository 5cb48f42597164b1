#include "engine/rank_memory.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "data_parallel/grad_reducer.h"
#include "model/expert_rows.h"

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

namespace {

// The expert buffer's tensors and units (one per MoE layer), (offset, floats) in layout order,
// as data_parallel cuts them; built only where the expert buffer is sharded.
struct ExpertPieces {
  std::vector<std::pair<long, long>> tensors, units;
};
ExpertPieces expert_pieces(const RankLayout& layout, const ChunkPlacement& placement) {
  const ModelConfig& m = layout.model;
  const int layers =
      placement.num_layers < 0 ? m.num_layers - placement.first_layer : placement.num_layers;
  ExpertPieces out;
  if (layers > kLayersSizedWhole) return out;  // too many to name: planned whole
  const ParameterLayout experts(m, {0, layout.tensor}, placement,
                                expert_buffer_slice(m, layout.expert_parallel, 0));
  const std::vector<ParamSpec>& specs = experts.specs();
  for (const ParamSpec& spec : specs) out.tensors.emplace_back(spec.offset, spec.numel());
  for (auto [begin, end] : weight_units(experts)) {
    const long stop = end < (int)specs.size() ? specs[end].offset : experts.total();
    out.units.emplace_back(specs[begin].offset, stop - specs[begin].offset);
  }
  return out;
}

// The expert buffer (`floats`, padded) as its reducer and gatherer hold it over the
// expert-data group, as held_gradient_floats and held_weight_floats size the dense buffer over
// the data-parallel group (no vocabulary, no tied copy): its gradients, the gradients in
// reduction (MPI's temporaries; none counted for the reduction at the step when they are
// whole), its weights and their 16-bit copy.
struct HeldExpertFloats {
  HeldGradientFloats grads;
  HeldWeightFloats weights;
};
HeldExpertFloats held_expert_floats(const RankLayout& layout, const ChunkPlacement& placement,
                                    long floats, bool overlap_grad_reduce) {
  const int ranks = expert_data_size(layout);
  const long copy = layout.precision == kernels::Precision::kFp32 ? 0 : (floats + 1) / 2;
  HeldExpertFloats held{{floats, 0}, {floats, copy}};
  if (!layout.shard_gradients || ranks < 2) return held;
  const ExpertPieces pieces = expert_pieces(layout, placement);
  if (pieces.tensors.empty()) return held;
  const std::vector<data_parallel::Bucket> buckets =
      data_parallel::gradient_buckets(pieces.tensors, floats, gradient_bucket_floats(layout));
  const int in_flight = data_parallel::sharded_buckets_in_flight(layout.shard_parameters);
  if (overlap_grad_reduce)  // else every bucket fills before the first is reduced
    held.grads.resident =
        data_parallel::largest_sharded_gradient_floats(buckets, floats, ranks, in_flight, false);
  held.grads.in_flight =
      (ranks > 2 ? 2 : 1) * data_parallel::largest_bucket_window(buckets, in_flight - 1);
  if (!layout.shard_parameters) return held;
  const int window = held_unit_window(layout, placement);
  held.weights.weights =
      data_parallel::largest_sharded_weight_floats(pieces.units, floats, ranks, window, false);
  if (copy > 0)
    held.weights.low_precision_copy =
        (floats / ranks + data_parallel::largest_unit_window(pieces.units, window, false) + 1) / 2;
  return held;
}

}  // namespace

long shard_chunk_plan(MemoryPlan& plan, const RankLayout& layout, const ChunkPlacement& placement,
                      const LayoutSizes& sizes, long parameter_floats, bool overlap_grad_reduce) {
  plan.resize("adam exp_avg + exp_avg_sq", adam_moment_floats(layout, parameter_floats));
  long in_flight = 0;
  if (sizes.experts > 0) {  // expert parallelism: the expert buffer, as the dense one below
    const long pad = layout.distributed_optimizer ? 16L * expert_data_size(layout) : 16;
    const long experts = (sizes.experts + pad - 1) / pad * pad;
    plan.resize(kExpertMomentsRow, expert_moment_floats(layout, experts));
    const HeldExpertFloats held =
        held_expert_floats(layout, placement, experts, overlap_grad_reduce);
    plan.resize(kExpertGradientsRow, held.grads.resident);
    in_flight += held.grads.in_flight;
    plan.resize(expert_weights_row(layout.model, placement, layout.expert_parallel),
                held.weights.weights);
    if (layout.precision != kernels::Precision::kFp32)
      plan.resize(expert_weight_copy_row(layout.precision), held.weights.low_precision_copy);
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
  return in_flight + grads.in_flight;
}

namespace {

RankMemoryPlan plan_of(const RankLayout& layout, int stage, const ScheduleNeeds& needs,
                       int microbatches, bool overlap_grad_reduce, const ChunkSizes& sizes,
                       bool checkpoint_snapshot) {
  RankMemoryPlan out;
  const TensorParallelRank tp{0, layout.tensor};
  const int seq = layout.local_seq();  // context parallelism: this rank's tokens
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
