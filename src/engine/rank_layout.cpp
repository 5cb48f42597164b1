#include "engine/rank_layout.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "data_parallel/grad_reducer.h"

namespace trident::engine {

std::vector<int> RankLayout::even_split(int num_layers, int stages) {
  return std::vector<int>(stages, num_layers / stages);
}

ChunkPlacement RankLayout::placement(int stage, int chunk) const {
  const int vs = chunk * pipeline + stage;
  int first = 0;
  for (int k = 0; k < vs; ++k) first += split[k];
  return {first, split[vs], vs == 0, vs == pipeline * virtual_stages - 1};
}

int RankLayout::owner_of(const std::string& name) const {
  const int p = pipeline, v = virtual_stages;
  if (name.rfind("embedding.", 0) == 0) return 0;
  if (name.rfind("final_layernorm.", 0) == 0 || name.rfind("output_layer.", 0) == 0)
    return (p * v - 1) % p;
  int layer = std::stoi(name.substr(7, name.find('.', 7) - 7));
  for (int vs = 0, end = 0; vs < p * v; ++vs)
    if (layer < (end += split[vs])) return vs % p;
  throw std::out_of_range("layer " + std::to_string(layer) + " outside the pipeline split");
}

int RankLayout::recomputed_layers(int layers) const {
  if (recompute_granularity != "full") return 0;
  // uniform recomputes every layer; block the first recompute_num_layers of each chunk
  // (all of them when the chunk has fewer: as Megatron, not an error, since with uneven
  // pipeline stages one N has to fit chunks of different sizes).
  return recompute_method == "block" ? std::min(layers, recompute_num_layers) : layers;
}

int RankLayout::recompute_group_size() const {
  // Megatron's uniform method keeps the input of each group of recompute_num_layers
  // consecutive layers and recomputes the group as one; block checkpoints layer by layer.
  return recompute_granularity == "full" && recompute_method == "uniform"
             ? std::max(1, recompute_num_layers)
             : 1;
}

ScheduleNeeds schedule_needs(const std::vector<pipeline_parallel::ScheduleConfig>& schedules,
                             int stage) {
  namespace pp = pipeline_parallel;
  const int chunks = schedules.front().chunks;
  ScheduleNeeds needs{std::vector<int>(chunks, 0), std::vector<int>(chunks, 0),
                      std::vector<int>(chunks, 0)};
  for (const pp::ScheduleConfig& schedule : schedules) {
    const std::vector<pp::PipelineOp> ops = pp::build_schedule(schedule, stage);
    const std::vector<int> slots = pp::max_in_flight(ops, chunks);
    const std::vector<int> deferred = pp::max_deferred_weight_grads(ops, chunks);
    const std::vector<int> unfinished = pp::max_unfinished(ops, chunks);
    for (int j = 0; j < chunks; ++j) {
      needs.slots[j] = std::max(needs.slots[j], slots[j]);
      needs.deferred[j] = std::max(needs.deferred[j], deferred[j]);
      needs.unfinished[j] = std::max(needs.unfinished[j], unfinished[j]);
    }
  }
  return needs;
}

ChunkOptions chunk_options(const RankLayout& layout, int stage, int chunk,
                           const ScheduleNeeds& needs) {
  ChunkOptions options;
  options.placement = layout.placement(stage, chunk);
  options.slots = needs.slots[chunk];
  options.deferred_weight_grads = needs.deferred[chunk];
  options.unfinished = needs.unfinished[chunk];
  options.recompute_layers = layout.recomputed_layers(options.placement.num_layers);
  options.recompute_group = layout.recompute_group_size();
  options.recompute_attention = layout.recompute_granularity == "selective";
  options.precision = layout.precision;
  options.dropout = layout.dropout;
  options.pad_multiple = layout.distributed_optimizer ? 16L * layout.data : 16;
  options.expert_pad_multiple = layout.distributed_optimizer ? 16L * expert_data_size(layout) : 16;
  options.shard_gradients = layout.shard_gradients && layout.data > 1;
  options.shard_parameters = layout.shard_parameters && layout.data > 1;
  options.vocabulary_block_rows = vocabulary_block_rows(layout, options.placement);
  options.logits_chunk_rows = layout.logits_chunk_rows;
  options.moe_aux_loss_coeff = layout.moe_aux_loss_coeff;
  options.moe_z_loss_coeff = layout.moe_z_loss_coeff;
  options.expert_parallel = layout.expert_parallel;
  options.expert_tensor_parallel = layout.expert_tensor_parallel;
  options.packed = layout.packed;
  options.sequence_parallel = layout.sequence_parallel;
  options.context_parallel.size = layout.context;
  options.context_parallel.type = layout.cp_comm_type;
  return options;
}

long adam_moment_floats(const RankLayout& layout, long parameter_floats) {
  return 2 * (layout.distributed_optimizer ? parameter_floats / layout.data : parameter_floats);
}

int expert_data_size(const RankLayout& layout) {
  const int etp = layout.expert_tensor_parallel > 0 ? layout.expert_tensor_parallel : layout.tensor;
  return layout.tensor * layout.data / (etp * std::max(1, layout.expert_parallel));
}

long expert_moment_floats(const RankLayout& layout, long expert_floats) {
  return 2 *
         (layout.distributed_optimizer ? expert_floats / expert_data_size(layout) : expert_floats);
}

long gradient_bucket_floats(const RankLayout& layout) {
  if (layout.ddp_bucket_size > 0) return layout.ddp_bucket_size;
  const long minimum = layout.shard_gradients ? 10'000'000L : 40'000'000L;
  return std::max(minimum, 1'000'000L * layout.data);
}

// Half a gradient bucket: the output layer then holds about as much as the layers do (the
// block running and the next, blocks of gradient in reduction), and it ends on a 2 MiB page
// where the width allows (the word embedding starts the buffer, so its blocks' pages are
// given back whole).
int vocabulary_block_rows(const RankLayout& layout, const ChunkPlacement& placement) {
  const ModelConfig& m = layout.model;
  const bool tied_split = m.tied_output() && placement.pre_process != placement.post_process;
  if (!layout.shard_parameters || layout.data < 2 ||
      layout.precision == kernels::Precision::kFp16 || tied_split ||
      !(placement.pre_process || placement.post_process))
    return 0;
  const long h = m.hidden_size, target = gradient_bucket_floats(layout) / 2;
  const long page = 512L * 1024, page_rows = page / std::gcd(h, page);
  if (page_rows * h <= target) return (int)(target / (page_rows * h) * page_rows);
  return (int)std::max(1L, target / h);
}

data_parallel::VocabularyBlocks vocabulary_blocks(const RankLayout& layout,
                                                  const ChunkPlacement& placement, int tensors) {
  data_parallel::VocabularyBlocks v;
  const int rows = vocabulary_block_rows(layout, placement);
  if (rows == 0 || tensors == 0) return v;
  v.block_floats = (long)rows * layout.model.hidden_size;
  if (placement.post_process) v.head_tensor = layout.model.tied_output() ? 0 : tensors - 1;
  if (placement.pre_process) v.sparse_tensor = 0;
  return v;
}

HeldGradientFloats held_gradient_floats(const RankLayout& layout, const ChunkPlacement& placement,
                                        const LayoutSizes& sizes, long parameter_floats,
                                        bool overlap_grad_reduce) {
  if (!layout.shard_gradients || layout.data < 2 || sizes.tensors.empty())
    return {parameter_floats, parameter_floats};
  const data_parallel::VocabularyBlocks vocabulary =
      vocabulary_blocks(layout, placement, (int)sizes.tensors.size());
  const std::vector<data_parallel::Bucket> buckets = data_parallel::gradient_buckets(
      sizes.tensors, parameter_floats, gradient_bucket_floats(layout), vocabulary);
  const int in_flight = data_parallel::sharded_buckets_in_flight(layout.shard_parameters);
  HeldGradientFloats held;
  // The bucket backward fills, and those still being reduced. The last stage forms a tied output
  // layer's gradient (the word embedding's copy, the first tensor: the last bucket) with the loss
  // in forward; on a pipeline the first stage's bucket of it also waits for the step (summed
  // across the two stages first: RankModel's holds_tied_copy).
  const bool embedding_held =
      layout.model.tied_output() && !vocabulary.active() &&
      (placement.post_process || (placement.pre_process && layout.pipeline > 1));
  // Without overlap every bucket is filled before the first is reduced.
  held.resident = overlap_grad_reduce
                      ? data_parallel::largest_sharded_gradient_floats(
                            buckets, parameter_floats, layout.data, in_flight, embedding_held)
                      : parameter_floats;
  // MPI stages a reduction's incoming slices: once on the owner, twice on the inner ranks of
  // its reduction tree (d > 2).
  held.in_flight =
      (layout.data > 2 ? 2 : 1) * data_parallel::largest_bucket_window(buckets, in_flight - 1);
  return held;
}

int held_unit_window(const RankLayout& layout, const ChunkPlacement& placement) {
  const int layers = placement.num_layers < 0 ? layout.model.num_layers - placement.first_layer
                                              : placement.num_layers;
  return 2 * (layout.recomputed_layers(layers) > 0 ? layout.recompute_group_size() : 1);
}

HeldWeightFloats held_weight_floats(const RankLayout& layout, const ChunkPlacement& placement,
                                    const LayoutSizes& sizes, long parameter_floats) {
  const long copy = layout.precision == kernels::Precision::kFp32 ? 0 : (parameter_floats + 1) / 2;
  if (!layout.shard_parameters || layout.data < 2 || sizes.units.empty())
    return {parameter_floats, copy};
  const int window = held_unit_window(layout, placement);
  const data_parallel::VocabularyBlocks vocabulary =
      vocabulary_blocks(layout, placement, (int)sizes.tensors.size());
  const bool wrap = placement.post_process && layout.model.tied_output() && !vocabulary.active();
  const std::vector<std::pair<long, long>> units =
      data_parallel::vocabulary_units(sizes.units, sizes.tensors, vocabulary);
  HeldWeightFloats held;
  held.weights = data_parallel::largest_sharded_weight_floats(units, parameter_floats, layout.data,
                                                              window, wrap);
  if (copy > 0) {
    // The shard's copy stays (the source of the linear weights' gathers); a gathered unit's
    // goes as it is given back: the shard plus the largest window, whole.
    const long held_units = data_parallel::largest_unit_window(units, window, wrap);
    held.low_precision_copy = (parameter_floats / layout.data + held_units + 1) / 2;
  }
  return held;
}

RankBufferShape rank_buffer_shape(const RankLayout& layout, int stage, int microbatches,
                                  long gradient_floats, bool overlap_grad_reduce) {
  const ModelConfig& m = layout.model;
  RankBufferShape s;
  s.stages = layout.pipeline, s.chunks = layout.virtual_stages, s.stage = stage;
  s.microbatches = microbatches;
  // With sequence parallelism a stage sends only its own 1/t of the rows.
  s.boundary_floats = (long)layout.micro_batch * layout.local_seq() * m.hidden_size /
                      (layout.sequence_parallel ? layout.tensor : 1);
  // Only a tied output layer shares the word embedding across the pipeline's two ends.
  s.tied_embedding_floats =
      m.tied_output() ? (long)m.padded_vocab_size(layout.tensor) / layout.tensor * m.hidden_size
                      : 0;
  s.gradient_floats = gradient_floats;
  s.data = layout.data;
  s.overlap_grad_reduce = overlap_grad_reduce;
  if (layout.shard_gradients && layout.data > 1)
    s.reduction_cap_floats = (long)layout.virtual_stages *
                             data_parallel::sharded_buckets_in_flight(layout.shard_parameters) *
                             gradient_bucket_floats(layout);
  return s;
}

}  // namespace trident::engine
