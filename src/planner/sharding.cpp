#include "planner/sharding.h"

#include <algorithm>

#include "planner/collectives.h"

namespace trident::planner {

namespace {

// trident moves gradients and weights between ranks as fp32, whatever the precision.
constexpr double kWireBytes = 4;

// The bytes a rank sends in a ring reduce-scatter or all-gather of `bytes`.
double ring_half_bytes(double bytes, int ranks) {
  return ranks > 1 ? (double)(ranks - 1) / ranks * bytes : 0;
}

// At least the last bucket of a collective over `floats` cannot overlap (nothing is left to
// compute when it starts).
double last_part(double seconds, double part_floats, double floats) {
  return seconds * std::min(1.0, part_floats / std::max(floats, 1.0));
}

// Sharded gradients: the buckets reduce-scattered after every micro-batch's backward (under
// it, less the last bucket), and those held back to the step (exposed: nothing is left to
// run under them).
struct GradientScatters {
  double each = 0, each_exposed_part = 0, held = 0, bytes = 0;
};

GradientScatters gradient_scatters(const DataParallelWork& w, const LinkSpec& link) {
  const double each_floats = w.parameter_floats - w.held_back_floats + w.gathers.extra_scattered;
  GradientScatters g;
  if (each_floats > 0) {
    g.each = ring_reduce_scatter_seconds(each_floats * kWireBytes, w.data, link);
    g.each_exposed_part = last_part(g.each, w.bucket_floats, each_floats);
  }
  if (w.held_back_floats > 0)
    g.held = ring_reduce_scatter_seconds(w.held_back_floats * kWireBytes, w.data, link);
  g.bytes =
      ring_half_bytes((w.microbatches * each_floats + w.held_back_floats) * kWireBytes, w.data);
  return g;
}

DataParallelTraffic zero3_traffic(const DataParallelWork& w, const LinkSpec& link) {
  const UnitGathers& g = w.gathers;
  const double forward_gather = ring_all_gather_seconds(g.forward * kWireBytes, w.data, link);
  const double backward_gather = ring_all_gather_seconds(g.backward * kWireBytes, w.data, link);
  const GradientScatters scatter = gradient_scatters(w, link);
  // Each micro-batch: the forward's gathers run ahead of it (prefetch), except its first
  // unit's; the backward's gathers and the reduce-scatters run under the backward, except its
  // first unit's gather and the last bucket's reduction.
  const double forward =
      std::max(forward_gather - w.forward, last_part(forward_gather, g.forward_waited, g.forward));
  const double backward = std::max(
      backward_gather + scatter.each - w.backward,
      last_part(backward_gather, g.backward_waited, g.backward) + scatter.each_exposed_part);
  DataParallelTraffic t;
  t.bytes = w.microbatches * ring_half_bytes((g.forward + g.backward) * kWireBytes, w.data) +
            scatter.bytes;
  t.seconds = w.microbatches * (forward_gather + backward_gather + scatter.each) + scatter.held;
  t.exposed = w.microbatches * (forward + backward) + scatter.held;
  return t;
}

DataParallelTraffic zero2_traffic(const DataParallelWork& w, const LinkSpec& link) {
  const double gather = ring_all_gather_seconds(w.parameter_floats * kWireBytes, w.data, link);
  const GradientScatters scatter = gradient_scatters(w, link);
  // Every micro-batch's reductions complete before the next micro-batch starts
  // (GradientReducer::finish_micro_batch): each hides under its own backward, less its last
  // bucket; the updated values are gathered during the next forward (--overlap-param-gather).
  const double per_microbatch = std::max(scatter.each - w.backward, scatter.each_exposed_part);
  DataParallelTraffic t;
  t.bytes = scatter.bytes + ring_half_bytes(w.parameter_floats * kWireBytes, w.data);
  t.seconds = w.microbatches * scatter.each + scatter.held + gather;
  t.exposed = w.microbatches * per_microbatch + scatter.held + std::max(gather - w.forward, 0.0);
  return t;
}

// no_shard and optim: one reduction of the accumulated gradients in the last backward.
DataParallelTraffic unsharded_gradient_traffic(bool distributed_optimizer,
                                               const DataParallelWork& w, const LinkSpec& link) {
  const double buffer = w.parameter_floats * kWireBytes;
  double seconds = 0, hide = 0;
  if (distributed_optimizer) {
    // Reduce-scatter the gradients during the last backward, all-gather the updated values
    // during the next forward (--overlap-grad-reduce --overlap-param-gather).
    seconds = ring_reduce_scatter_seconds(buffer, w.data, link) +
              ring_all_gather_seconds(buffer, w.data, link);
    hide = w.backward + w.forward;
  } else {
    seconds = ring_all_reduce_seconds(buffer, w.data, link);
    hide = w.backward;
  }
  DataParallelTraffic t;
  t.bytes = 2 * ring_half_bytes(buffer, w.data);
  t.seconds = seconds;
  t.exposed = std::max(seconds - hide, last_part(seconds, w.bucket_floats, w.parameter_floats));
  return t;
}

}  // namespace

DataParallelTraffic data_parallel_traffic(data_parallel::ShardingStrategy strategy,
                                          const DataParallelWork& work, const LinkSpec& link) {
  if (work.data < 2) return {};
  switch (strategy) {
    case data_parallel::ShardingStrategy::kNoShard:
      return unsharded_gradient_traffic(false, work, link);
    case data_parallel::ShardingStrategy::kOptim:
      return unsharded_gradient_traffic(true, work, link);
    case data_parallel::ShardingStrategy::kOptimGrads:
      return zero2_traffic(work, link);
    case data_parallel::ShardingStrategy::kOptimGradsParams:
      return zero3_traffic(work, link);
  }
  return {};
}

UnitGathers& UnitGathers::operator+=(const UnitGathers& o) {
  forward += o.forward, backward += o.backward;
  forward_waited += o.forward_waited, backward_waited += o.backward_waited;
  extra_scattered += o.extra_scattered;
  return *this;
}

namespace {

// The units (indices into LayoutSizes::units) each pass asks for, in order: the embedding
// (or a last stage's tied copy) first in the layout, then the layers, then the final norm
// with an untied output layer (parameters/parameter_layout.h weight_units).
struct PassUnits {
  std::vector<int> forward, backward;
};

PassUnits pass_units(int units, const ChunkPlacement& p, bool tied_output) {
  const bool embedding = p.pre_process || (p.post_process && tied_output);
  const int first_layer = embedding ? 1 : 0, end_layers = units - (p.post_process ? 1 : 0);
  PassUnits out;
  if (p.pre_process) out.forward.push_back(0);
  for (int u = first_layer; u < end_layers; ++u) out.forward.push_back(u);
  if (p.post_process) {
    out.forward.push_back(units - 1);
    // A later stage's copy of a tied word embedding, for the output layer (a chunk with the
    // embedding keeps it through the forward: gathered once).
    if (tied_output && !p.pre_process) out.forward.push_back(0);
    out.backward.push_back(units - 1);
  }
  // A recomputed group is gathered whole before its recomputation: still each layer once.
  for (int u = end_layers - 1; u >= first_layer; --u) out.backward.push_back(u);
  return out;
}

}  // namespace

namespace {

// The output layer's gathers per micro-batch: every block twice per chunk of rows, less the
// block each turn finds still there (the last going up, the first coming down to the next
// chunk).
double head_gathers(const LayoutSizes& sizes, const VocabularyTraffic& v) {
  const std::vector<std::pair<long, long>> blocks =
      data_parallel::vocabulary_blocks(sizes.tensors, v.blocks);
  if (blocks.empty()) return 0;
  const double whole = (double)sizes.tensors[v.blocks.head_tensor].second;
  return 2 * v.logits_chunks * whole - v.logits_chunks * (double)blocks.back().second -
         (v.logits_chunks - 1) * (double)blocks.front().second;
}

// Training's passes with the vocabulary out of the units: the word embedding's floats leave
// the first unit (swapped rows instead, both ways), the output layer's leave its unit and come
// back as its blocks' gathers.
void move_vocabulary(const LayoutSizes& sizes, const VocabularyTraffic& v, UnitGathers& g) {
  const data_parallel::VocabularyBlocks& b = v.blocks;
  if (b.sparse_tensor >= 0) {
    const double word = (double)sizes.tensors[b.sparse_tensor].second;
    g.forward += v.swapped_floats - word;
    g.backward += v.swapped_floats;
    g.forward_waited = std::max(0.0, g.forward_waited - word);
    if (b.sparse_tensor != b.head_tensor) g.extra_scattered -= word;
  }
  if (b.head_tensor >= 0) {
    const double head = (double)sizes.tensors[b.head_tensor].second;
    if (b.head_tensor != b.sparse_tensor) {  // untied: it left the final norm's unit
      g.forward -= head, g.backward -= head;
      g.backward_waited = std::max(0.0, g.backward_waited - head);
    }
    g.forward += head_gathers(sizes, v);
    g.extra_scattered += (v.logits_chunks - 1) * head;
  }
}

}  // namespace

UnitGathers chunk_unit_gathers(const LayoutSizes& sizes, const ChunkPlacement& placement,
                               bool tied_output, const VocabularyTraffic& vocabulary) {
  UnitGathers g;
  if (sizes.units.empty()) {
    g.forward = g.backward = (double)sizes.parameters;
    return g;
  }
  const PassUnits passes = pass_units((int)sizes.units.size(), placement, tied_output);
  auto floats = [&](int u) { return (double)sizes.units[u].second; };
  for (int u : passes.forward) g.forward += floats(u);
  for (int u : passes.backward) g.backward += floats(u);
  if (!passes.forward.empty()) g.forward_waited = floats(passes.forward.front());
  if (!passes.backward.empty()) g.backward_waited = floats(passes.backward.front());
  if (vocabulary.blocks.active() && !sizes.tensors.empty()) move_vocabulary(sizes, vocabulary, g);
  return g;
}

}  // namespace trident::planner
