#include "engine/optimizer_step.h"

#include <cmath>

#include "engine/tied_embedding.h"
#include "optim/adamw.h"
#include "tensor_parallel/sequence_parallel_grads.h"

namespace trident::engine {

namespace {

// Finishes every chunk's data-parallel reduction; returns the ranges this rank updates.
std::vector<optim::GradRange> finish_reductions(RankModel& model, int data_ranks,
                                                const StepOptions& o) {
  std::vector<optim::GradRange> ranges;
  for (size_t j = 0; j < model.chunks.size(); ++j) {
    const double start = o.now_us ? o.now_us() : 0;
    model.reducers[j]->finish();
    if (data_ranks > 1 && o.record)
      o.record("wait for gradient reduction", "data-parallel", start, o.now_us());
    ranges.push_back({&model.chunks[j]->trainable_parameters(), model.reducers[j]->shard_begin(),
                      model.reducers[j]->shard_end()});
  }
  return ranges;
}

// Expert parallelism: finishes each expert buffer's reduction over the expert-data group;
// returns the ranges this rank updates (empty: no expert buffer on this rank).
std::vector<optim::GradRange> finish_expert_reductions(RankModel& model) {
  std::vector<optim::GradRange> ranges;
  for (size_t j = 0; j < model.expert_reducers.size(); ++j) {
    data_parallel::GradientReducer* reducer = model.expert_reducers[j].get();
    if (!reducer) continue;
    reducer->finish();
    ranges.push_back(
        {&model.chunks[j]->expert_parameters(), reducer->shard_begin(), reducer->shard_end()});
  }
  return ranges;
}

// The global norm, with the expert buffers' gradients counted once each when there are any.
double gradient_norm(const std::vector<optim::GradRange>& dense,
                     const std::vector<optim::GradRange>& experts,
                     distributed::ProcessGroups& groups, bool distributed_optimizer) {
  comm::Communicator &tp = *groups.tensor, &pp = *groups.pipeline, &dp = *groups.data;
  comm::SingleRankCommunicator replicas("data"), expert_replicas("expert-data");
  comm::Communicator& data = distributed_optimizer ? dp : replicas;
  if (experts.empty()) return optim::global_grad_norm(dense, tp, pp, data);
  comm::Communicator& expert_data = distributed_optimizer ? *groups.expert_data : expert_replicas;
  return optim::global_grad_norm(dense, tp, pp, data, {experts, *groups.expert, expert_data});
}

// The expert buffers' AdamW on this rank's shard, then the all-gather of the updated values
// over the expert-data group (nothing to gather without the distributed optimizer).
void step_experts(RankModel& model, float lr, float multiplier) {
  for (size_t j = 0; j < model.expert_optimizers.size(); ++j) {
    if (!model.expert_optimizers[j]) continue;
    model.expert_optimizers[j]->update(model.chunks[j]->expert_parameters(), lr, multiplier);
    model.expert_reducers[j]->all_gather_values();
  }
}

}  // namespace

StepOutcome finalize_and_step(RankModel& model, distributed::ProcessGroups& groups,
                              const StepOptions& o) {
  comm::Communicator &tp = *groups.tensor, &pp = *groups.pipeline, &dp = *groups.data;
  std::vector<GPTModel*> chunks = model.chunk_pointers();
  // A gradient whose zeroing waited for a product that never came reads as zeros from here
  // (the tied-embedding sum below adds through a ParamRef, not through grads()).
  for (GPTModel* chunk : chunks) chunk->trainable_parameters().grads();
  // The tied-embedding sum across stages is linear, so it may come before or after the
  // data-parallel sum; but after a reduce-scatter only this rank's shard is valid, and the
  // two stages' shards cover different elements (the reducer holds that bucket back).
  if (o.distributed_optimizer) sync_tied_embedding(chunks, pp);
  std::vector<optim::GradRange> ranges = finish_reductions(model, dp.size(), o);
  const std::vector<optim::GradRange> expert_ranges = finish_expert_reductions(model);
  // Sharded weights: no gathered unit may outlive the weights it copied.
  for (auto& gatherer : model.gatherers) gatherer->release_all();
  if (!o.distributed_optimizer) sync_tied_embedding(chunks, pp);
  // Sequence parallelism's partial LayerNorm gradients, summed over the tensor group after
  // the data-parallel reduction (it is linear, so the order does not matter; doing it after
  // keeps it off buffers a non-blocking reduction may still be using). With the
  // distributed optimizer only this rank's shard is meaningful, and the tensor group's
  // ranks hold the same shard ranges of identically laid-out buffers.
  // Replicated key/value projections (grouped-query attention, t > G) likewise.
  for (GPTModel* chunk : chunks)
    tensor_parallel::allreduce_sequence_parallel_grads(
        chunk->parameters(), tp, chunk->sequence_parallel(), chunk->routers_see_own_rows());
  if (o.inject_overflow)
    model.chunks[0]->trainable_parameters().grads()[ranges[0].begin] = INFINITY;
  // Reduced over every group, so all ranks reach the same overflow verdict.
  StepOutcome out;
  out.grad_norm =
      gradient_norm(ranges, expert_ranges, groups, o.distributed_optimizer) / o.loss_scale;
  out.skipped = model.scaler.update(!std::isfinite(out.grad_norm));
  if (out.skipped) return out;
  const float multiplier = optim::clip_coefficient(out.grad_norm, o.clip_grad) / o.loss_scale;
  step_experts(model, o.lr, multiplier);
  for (size_t j = 0; j < model.chunks.size(); ++j) {
    optim::AdamW& adam = *model.optimizers[j];
    data_parallel::GradientReducer& reducer = *model.reducers[j];
    Parameters& params = model.chunks[j]->trainable_parameters();
    if (!reducer.overlaps_param_gather()) {
      adam.update(params, o.lr, multiplier);
      reducer.all_gather_values();
      continue;
    }
    // Each bucket's gather starts as soon as this rank's part of it is updated, in the
    // order the next forward needs them: the first gathers overlap the rest of the update.
    adam.start_step();
    for (size_t b : reducer.gather_order()) {
      auto [lo, hi] = reducer.shard_part(b);
      adam.update_range(params, o.lr, multiplier, lo, hi);
      reducer.start_gather(b);
    }
  }
  return out;
}

}  // namespace trident::engine
